// io/weights/meta_checkpoint.h: Meta's original Llama checkpoint folders (params.json and the model-parallel shards
// consolidated.00.pth, consolidated.01.pth, ..., as Meta's download gives them) as ModelWeights.
#pragma once

#include <filesystem>

#include "io/weights/model_config.h"
#include "io/weights/model_weights.h"

namespace kascade {

/// Whether `dir` holds a params.json and a consolidated.NN.pth: what load_model reads as a Meta folder.
bool is_meta_checkpoint_dir(const std::filesystem::path& dir);

/// Parses Meta's params.json (dim, n_layers, n_heads, n_kv_heads, vocab_size, multiple_of, ffn_dim_multiplier,
/// norm_eps, rope_theta, use_scaled_rope; max_batch_size and max_seq_len, settings of Meta's inference code, are
/// ignored) into a ModelConfig as Meta's model.py builds the model: the FFN width from multiple_of and
/// ffn_dim_multiplier, use_scaled_rope as Llama 3.1's scaling (factor 8, low 1, high 4, original context 8192),
/// RoPE on interleaved pairs (RopeLayout::Interleaved). vocab_size is 0 where the file leaves it to the tokenizer (-1
/// or absent). Any other field is refused; errors name the file and the field.
ModelConfig load_meta_params(const std::filesystem::path& params_json);

/// Reads the folder `dir`: params.json, then the shards consolidated.00.pth ... (numbered from 00 without a gap),
/// each a torch.save state dict under Meta's names (tok_embeddings.weight, layers.N.attention.wq.weight, ...,
/// norm.weight, output.weight). A weight split over the shards is joined along the dimension Meta's model-parallel
/// layers split it; every shape is checked against params.json. The rows of wq and wk are reordered from Meta's
/// interleaved RoPE pairs to rotate-half, as Hugging Face's converter does (so the config says RotateHalf, and the
/// logits equal those of the converted folder to the bit). Matrices are placed as model_weights.h describes: in
/// place in the mapped file for a single shard (wq and wk excepted), joined into memory for several.
ModelWeights load_meta_checkpoint(const std::filesystem::path& dir, const LoadOptions& options = {});

}  // namespace kascade
