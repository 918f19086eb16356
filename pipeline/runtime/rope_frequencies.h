// pipeline/runtime/rope_frequencies.h: the RoPE frequencies of a model, with the rope_scaling schemes of Hugging Face
// (modeling_rope_utils): plain, linear, llama3 (Llama 3.1 / 3.2) and yarn (Qwen2.5 long context and others).
//
// With d = head_dim and base frequencies f_j = theta^(-2j/d), j < d/2:
//   linear: f_j / factor.
//   llama3: wavelength w_j = 2 pi / f_j against the pre-training context C (original_max_position_embeddings):
//           w_j < C / high_freq_factor: f_j;  w_j > C / low_freq_factor: f_j / factor;  otherwise the blend
//           (1 - s) f_j / factor + s f_j with s = (C / w_j - low_freq_factor) / (high_freq_factor - low_freq_factor).
//   yarn:   blend of f_j (extrapolation) and f_j / factor (interpolation) by a ramp over the dimensions between the
//           correction dimensions of beta_fast and beta_slow rotations in C; cos and sin are multiplied by the
//           attention factor (default 0.1 ln(factor) + 1, or the mscale / mscale_all_dim ratio).
// Then, if the config has per-pair factors (a GGUF file's rope_freqs), f_j / factor_j, as llama.cpp's ggml_rope_ext.
#pragma once

#include <vector>

#include "io/weights/model_config.h"

namespace kascade {

struct RopeFrequencies {
    std::vector<double> inv_freq;   ///< [head_dim/2] radians per position of each pair
    double attention_factor = 1.0;  ///< multiplies cos and sin (YaRN), else 1
};

RopeFrequencies rope_frequencies(const ModelConfig& config);

}  // namespace kascade
