// io/weights/model_weights.h: a loaded model: its config and views of every weight, whatever the file format.
//
// Matrices are row-major [out_features][in_features] (PyTorch nn.Linear layout) in both formats, and stay in the
// file's dtype (F32, BF16 or F16), used in place from the memory-mapped file: a 16 GB BF16 checkpoint takes 16 GB,
// not 32 (a tensor the file places at a misaligned address is copied). LoadOptions::weights_dtype can instead
// convert every matrix to fp32 (the behaviour before BF16 products existed, for comparison) or to BF16. Norm weights
// and biases, a few kilobytes, are always converted to fp32.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/modes.h"
#include "io/weights/dtype.h"
#include "io/weights/model_config.h"

namespace kascade {

/// A weight matrix as stored: row-major [rows][cols] elements of `dtype` (aligned to the element size).
struct WeightMatrix {
    DType dtype = DType::F32;
    const void* data = nullptr;
    int rows = 0;
    int cols = 0;
};

/// Row `row` of `m` as fp32 (out: [m.cols]): an embedding lookup.
void weight_row_to_f32(const WeightMatrix& m, int row, float* out);

// WeightsDType, the dtype weight matrices have in memory, and its names: base/modes.h.

struct LoadOptions {
    WeightsDType weights_dtype = WeightsDType::File;
};

struct LayerWeights {
    const float* attn_norm = nullptr;  ///< [dim]
    WeightMatrix wq;                   ///< [n_heads*head_dim][dim]
    WeightMatrix wk;                   ///< [n_kv_heads*head_dim][dim]
    WeightMatrix wv;                   ///< [n_kv_heads*head_dim][dim]
    const float* bq = nullptr;         ///< [n_heads*head_dim] or null
    const float* bk = nullptr;         ///< [n_kv_heads*head_dim] or null
    const float* bv = nullptr;         ///< [n_kv_heads*head_dim] or null
    WeightMatrix wo;                   ///< [dim][n_heads*head_dim]
    const float* bo = nullptr;         ///< [dim] or null (HF Llama with attention_bias; not Qwen2)
    const float* q_norm = nullptr;     ///< [head_dim] per-head RMSNorm weight of q, or null (Qwen3)
    const float* k_norm = nullptr;     ///< [head_dim] per-head RMSNorm weight of k, or null (Qwen3)
    const float* mlp_norm = nullptr;   ///< [dim]
    WeightMatrix w_gate;               ///< [hidden_dim][dim]
    WeightMatrix w_up;                 ///< [hidden_dim][dim]
    WeightMatrix w_down;               ///< [dim][hidden_dim]
};

struct ModelWeights {
    ModelConfig config;
    WeightMatrix embed;  ///< [vocab_size][dim]
    std::vector<LayerWeights> layers;
    const float* final_norm = nullptr;                ///< [dim]
    WeightMatrix lm_head;                             ///< [vocab_size][dim] (the embedding's data when tied)
    WeightsDType weights_dtype = WeightsDType::File;  ///< the LoadOptions it was loaded with
    std::filesystem::path source;                     ///< the file or directory it was loaded from
    std::string format;                               ///< "llama2c", "safetensors", "meta" or "gguf"

    /// Keeps the mapped files and converted buffers the pointers above point into.
    std::shared_ptr<void> storage;

    /// Bytes of the weight matrices as held in memory (what a forward pass streams once per token).
    std::size_t matrix_bytes() const;
};

/// Loads a llama2.c checkpoint (.bin), a Hugging Face directory (config.json + model.safetensors or sharded
/// model.safetensors.index.json), a .safetensors file with config.json beside it, Meta's original folder
/// (params.json + consolidated.NN.pth, meta_checkpoint.h) or a llama.cpp .gguf file (gguf_checkpoint.h). Every
/// shape is checked against the config; errors name the file, the tensor and the expected and found shapes.
ModelWeights load_model(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace kascade
