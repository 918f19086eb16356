// kernels/rope.h: rotary position embedding in the two layouts checkpoints use.
//
// For pair j (0 <= j < head_dim/2) at position p the angle is p * inv_freq[j] (plain RoPE: inv_freq[j] =
// theta^(-2j/head_dim); scaled variants change the frequencies, see pipeline/runtime/rope_frequencies.h), and cos and
// sin are multiplied by an attention factor (1 but for YaRN). The layouts differ only in which two dimensions form
// pair j:
//   Interleaved (llama2.c / Meta):        (2j, 2j+1)
//   RotateHalf  (Hugging Face rotate_half): (j, j + head_dim/2)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kascade {

/// cos/sin of every (position, pair) for positions [0, max_positions), computed in double then rounded.
struct RopeTable {
    int head_dim = 0;
    int max_positions = 0;
    std::vector<float> cos;  ///< [max_positions][head_dim/2]
    std::vector<float> sin;  ///< [max_positions][head_dim/2]
};

/// inv_freq: [head_dim/2] angle per position of each pair; attention_factor scales cos and sin.
RopeTable rope_table(int head_dim, int max_positions, std::span<const double> inv_freq, double attention_factor = 1.0);

/// Rotates x in place: x is [n_rows][n_heads][head_dim], row r at position pos0 + r. interleaved selects the
/// llama2.c pairing (2j, 2j+1); otherwise rotate_half (j, j + head_dim/2).
void rope_apply(const RopeTable& table, bool interleaved, float* x, int64_t n_rows, int n_heads, int64_t pos0);

}  // namespace kascade
