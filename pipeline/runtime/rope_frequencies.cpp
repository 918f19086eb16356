// pipeline/runtime/rope_frequencies.cpp: the formulas of rope_frequencies.h, in double precision.
#include "pipeline/runtime/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kascade {
namespace {

void apply_llama3(const RopeScaling& s, std::vector<double>& f) {
    const double context = s.original_max_position_embeddings;
    const double low_freq_wavelen = context / s.low_freq_factor;
    const double high_freq_wavelen = context / s.high_freq_factor;
    for (double& freq : f) {
        const double wavelen = 2 * std::numbers::pi / freq;
        if (wavelen < high_freq_wavelen) continue;  // high frequencies are kept
        if (wavelen > low_freq_wavelen) {
            freq /= s.factor;  // low frequencies are interpolated
            continue;
        }
        const double smooth = (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        freq = (1 - smooth) * freq / s.factor + smooth * freq;
    }
}

double yarn_mscale(double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

/// The (fractional) dimension index whose pair makes `rotations` turns over `context` positions.
double yarn_correction_dim(double rotations, int dim, double base, double context) {
    return dim * std::log(context / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

double apply_yarn(const RopeScaling& s, int dim, double base, std::vector<double>& f) {
    double low = yarn_correction_dim(s.beta_fast, dim, base, s.original_max_position_embeddings);
    double high = yarn_correction_dim(s.beta_slow, dim, base, s.original_max_position_embeddings);
    if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // a one-point ramp would divide by zero
    for (size_t j = 0; j < f.size(); ++j) {
        const double ramp = std::clamp((static_cast<double>(j) - low) / (high - low), 0.0, 1.0);
        const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
        f[j] = f[j] / s.factor * (1 - extrapolation) + f[j] * extrapolation;
    }
    if (s.attention_factor > 0) return s.attention_factor;
    if (s.mscale > 0 && s.mscale_all_dim > 0) {
        return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
    }
    return yarn_mscale(s.factor, 1.0);
}

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& config) {
    const int dim = config.head_dim;
    const double base = config.rope_theta;
    RopeFrequencies r;
    r.inv_freq.resize(dim / 2);
    for (int j = 0; j < dim / 2; ++j) r.inv_freq[j] = std::pow(base, -2.0 * j / dim);
    const RopeScaling& s = config.rope_scaling;
    switch (s.type) {
        case RopeScalingType::None:
            break;
        case RopeScalingType::Linear:
            for (double& freq : r.inv_freq) freq /= s.factor;
            break;
        case RopeScalingType::Llama3:
            apply_llama3(s, r.inv_freq);
            break;
        case RopeScalingType::Yarn:
            r.attention_factor = apply_yarn(s, dim, base, r.inv_freq);
            break;
    }
    if (!config.rope_freq_factors.empty()) {
        for (int j = 0; j < dim / 2; ++j) r.inv_freq[j] /= config.rope_freq_factors[j];
    }
    return r;
}

}  // namespace kascade
