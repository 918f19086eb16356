// io/weights/hf_checkpoint.h: a Hugging Face Llama-family checkpoint (config.json + safetensors) as ModelWeights.
#pragma once

#include <filesystem>

#include "io/weights/model_weights.h"

namespace kascade {

/// Reads `config_json`, then the tensors of `weights` (a .safetensors file or a model.safetensors.index.json) under
/// their HF names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...). Checks every shape against
/// the config; F32 tensors are used in place when 4-byte aligned, everything else is converted to owned fp32.
ModelWeights load_hf_checkpoint(const std::filesystem::path& config_json, const std::filesystem::path& weights);

}  // namespace kascade
