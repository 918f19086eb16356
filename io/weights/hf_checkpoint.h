// io/weights/hf_checkpoint.h: a Hugging Face Llama-family checkpoint (config.json + safetensors) as ModelWeights.
#pragma once

#include <filesystem>

#include "io/weights/model_weights.h"

namespace kascade {

/// Reads `config_json`, then the tensors of `weights` (a .safetensors file or a model.safetensors.index.json) under
/// their HF names (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ...). Checks every shape against
/// the config; matrices are placed as model_weights.h describes.
ModelWeights load_hf_checkpoint(const std::filesystem::path& config_json, const std::filesystem::path& weights,
                                const LoadOptions& options = {});

}  // namespace kascade
