// io/weights/model_weights.h: a loaded model: its config and fp32 views of every weight, whatever the file format.
//
// Matrices are row-major [out_features][in_features] (PyTorch nn.Linear layout) in both formats. F32 tensors are
// used in place from the memory-mapped file (copied if the file places them at an address not 4-byte aligned);
// BF16/F16 tensors are converted once to owned fp32 buffers.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/weights/model_config.h"

namespace kascade {

struct LayerWeights {
    const float* attn_norm = nullptr;  ///< [dim]
    const float* wq = nullptr;         ///< [n_heads*head_dim][dim]
    const float* wk = nullptr;         ///< [n_kv_heads*head_dim][dim]
    const float* wv = nullptr;         ///< [n_kv_heads*head_dim][dim]
    const float* bq = nullptr;         ///< [n_heads*head_dim] or null
    const float* bk = nullptr;         ///< [n_kv_heads*head_dim] or null
    const float* bv = nullptr;         ///< [n_kv_heads*head_dim] or null
    const float* wo = nullptr;         ///< [dim][n_heads*head_dim]
    const float* bo = nullptr;         ///< [dim] or null (HF Llama with attention_bias; not Qwen2)
    const float* mlp_norm = nullptr;   ///< [dim]
    const float* w_gate = nullptr;     ///< [hidden_dim][dim]
    const float* w_up = nullptr;       ///< [hidden_dim][dim]
    const float* w_down = nullptr;     ///< [dim][hidden_dim]
};

struct ModelWeights {
    ModelConfig config;
    const float* embed = nullptr;  ///< [vocab_size][dim]
    std::vector<LayerWeights> layers;
    const float* final_norm = nullptr;  ///< [dim]
    const float* lm_head = nullptr;     ///< [vocab_size][dim] (== embed when tied)
    std::filesystem::path source;       ///< the file or directory it was loaded from
    std::string format;                 ///< "llama2c" or "safetensors"

    /// Keeps the mapped files and converted buffers the pointers above point into.
    std::shared_ptr<void> storage;
};

/// Loads a llama2.c checkpoint (.bin), a Hugging Face directory (config.json + model.safetensors or sharded
/// model.safetensors.index.json) or a .safetensors file with config.json beside it. Every shape is checked against
/// the config; errors name the file, the tensor and the expected and found shapes.
ModelWeights load_model(const std::filesystem::path& path);

}  // namespace kascade
