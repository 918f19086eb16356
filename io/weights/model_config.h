// io/weights/model_config.h: the hyper-parameters of a Llama-family model, read from a Hugging Face config.json or
// from a llama2.c checkpoint header.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

/// How RoPE pairs the dimensions of a head: llama2.c (Meta) checkpoints rotate adjacent pairs (2i, 2i+1);
/// Hugging Face checkpoints rotate (i, i + head_dim/2) ("rotate_half").
enum class RopeLayout { Interleaved, RotateHalf };

/// The RoPE frequency schemes of Hugging Face's `rope_scaling.rope_type` that kascade implements (None = "default").
enum class RopeScalingType { None, Linear, Llama3, Yarn };

/// The config.json spelling of a RopeScalingType ("default", "linear", "llama3", "yarn").
std::string_view rope_scaling_type_name(RopeScalingType type);

/// `rope_scaling` of config.json: which fields matter depends on the type (see pipeline/runtime/rope_frequencies.h
/// for the formulas). Defaults are Hugging Face's.
struct RopeScaling {
    RopeScalingType type = RopeScalingType::None;
    double factor = 1.0;                       ///< linear, llama3, yarn
    int original_max_position_embeddings = 0;  ///< llama3, yarn (yarn: max_position_embeddings when absent)
    double low_freq_factor = 1.0;              ///< llama3
    double high_freq_factor = 4.0;             ///< llama3
    double attention_factor = 0.0;             ///< yarn: scale of cos/sin; 0 = derived from factor and mscale
    double beta_fast = 32.0;                   ///< yarn
    double beta_slow = 1.0;                    ///< yarn
    double mscale = 0.0;                       ///< yarn (0 = absent)
    double mscale_all_dim = 0.0;               ///< yarn (0 = absent)
    bool truncate = true;                      ///< yarn: round the correction range to whole dimensions
};

struct ModelConfig {
    std::string model_type;  ///< "llama", "mistral", "qwen2", "qwen3", or "llama2c" for llama2.c checkpoints
    int dim = 0;             ///< hidden size
    int hidden_dim = 0;      ///< MLP intermediate size
    int n_layers = 0;
    int n_heads = 0;  ///< query heads
    int n_kv_heads = 0;
    int head_dim = 0;
    int vocab_size = 0;
    int max_seq_len = 0;  ///< max_position_embeddings (llama2.c: seq_len)
    float rope_theta = 10000.0f;
    RopeScaling rope_scaling;
    /// [head_dim/2] or empty: each pair's RoPE frequency is divided by its factor, after rope_scaling (a GGUF file's
    /// rope_freqs tensor, in which llama.cpp's converter stores Llama 3.1's scaling).
    std::vector<double> rope_freq_factors;
    float rms_norm_eps = 1e-5f;
    bool attention_bias = false;  ///< q/k/v projections have biases (Qwen2; HF Llama adds one on o_proj too)
    bool qk_norm = false;         ///< per-head RMSNorm of q and k before RoPE (Qwen3's q_norm / k_norm)
    bool tie_word_embeddings = true;
    int bos_token_id = -1;  ///< -1: the model has none
    int eos_token_id = -1;
    RopeLayout rope_layout = RopeLayout::RotateHalf;
    /// [n_layers] sliding attention window of each layer: a query at position p sees keys p - window < j <= p;
    /// 0 = the whole causal context (Mistral's sliding_window; Qwen's use_sliding_window + max_window_layers).
    std::vector<int> layer_window;

    int window(int layer) const { return layer_window.empty() ? 0 : layer_window[layer]; }
    bool has_window() const;
};

/// Parses a Hugging Face config.json (model_type llama, mistral, qwen2 or qwen3). Errors name the file and the field.
ModelConfig load_hf_config(const std::filesystem::path& config_json);

}  // namespace kascade
