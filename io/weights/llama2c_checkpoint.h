// io/weights/llama2c_checkpoint.h: Andrej Karpathy's llama2.c legacy checkpoint format (.bin).
//
// Layout (run.c, memory_map_weights): 7 x int32 header {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len}, a negative vocab_size meaning the classifier is not shared; then fp32 arrays token_embedding_table,
// rms_att_weight, wq, wk, wv, wo, rms_ffn_weight, w1 (gate), w2 (down), w3 (up), rms_final_weight, freq_cis_real,
// freq_cis_imag (unused: RoPE is recomputed), and wcls when unshared.
#pragma once

#include <filesystem>

#include "io/weights/model_weights.h"

namespace kascade {

/// Memory-maps a llama2.c checkpoint; every weight is used in place. Checks the header values and that the file size
/// is exactly what the header implies.
ModelWeights load_llama2c_checkpoint(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace kascade
