// io/weights/model_config.h: the hyper-parameters of a Llama-family model, read from a Hugging Face config.json or
// from a llama2.c checkpoint header.
#pragma once

#include <filesystem>
#include <string>

namespace kascade {

/// How RoPE pairs the dimensions of a head: llama2.c (Meta) checkpoints rotate adjacent pairs (2i, 2i+1);
/// Hugging Face checkpoints rotate (i, i + head_dim/2) ("rotate_half").
enum class RopeLayout { Interleaved, RotateHalf };

struct ModelConfig {
    std::string model_type;  ///< "llama", "mistral", "qwen2", or "llama2c" for llama2.c checkpoints
    int dim = 0;             ///< hidden size
    int hidden_dim = 0;      ///< MLP intermediate size
    int n_layers = 0;
    int n_heads = 0;  ///< query heads
    int n_kv_heads = 0;
    int head_dim = 0;
    int vocab_size = 0;
    int max_seq_len = 0;  ///< max_position_embeddings (llama2.c: seq_len)
    float rope_theta = 10000.0f;
    float rms_norm_eps = 1e-5f;
    bool attention_bias = false;  ///< q/k/v projections have biases (Qwen2; HF Llama adds one on o_proj too)
    bool tie_word_embeddings = true;
    int bos_token_id = -1;  ///< -1: the model has none
    int eos_token_id = -1;
    RopeLayout rope_layout = RopeLayout::RotateHalf;
};

/// Parses a Hugging Face config.json (model_type llama, mistral or qwen2). Errors name the file and the field.
ModelConfig load_hf_config(const std::filesystem::path& config_json);

}  // namespace kascade
