#include "pipeline/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace kascade {

Sampler::Sampler(const SamplerOptions& options) : options_(options), rng_(options.seed) {
    KASCADE_CHECK(options.temperature >= 0, "invalid --temperature {} (must be >= 0)", options.temperature);
    KASCADE_CHECK(options.top_p > 0 && options.top_p <= 1, "invalid --top-p {} (must be in (0, 1])", options.top_p);
}

int32_t Sampler::sample(const float* logits, int vocab_size) {
    if (options_.temperature == 0) {
        return static_cast<int32_t>(std::max_element(logits, logits + vocab_size) - logits);
    }
    const float z_max = *std::max_element(logits, logits + vocab_size);
    std::vector<double> p(vocab_size);
    double sum = 0;
    for (int i = 0; i < vocab_size; ++i) sum += p[i] = std::exp((logits[i] - z_max) / options_.temperature);
    std::vector<int32_t> order(vocab_size);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    // Keep the smallest prefix of the sorted distribution whose mass reaches top_p.
    double kept = 0;
    int n_kept = 0;
    while (n_kept < vocab_size && kept < options_.top_p * sum) kept += p[order[n_kept++]];
    std::uniform_real_distribution<double> uniform(0.0, kept);
    double r = uniform(rng_);
    for (int i = 0; i < n_kept; ++i) {
        r -= p[order[i]];
        if (r <= 0) return order[i];
    }
    return order[n_kept - 1];
}

}  // namespace kascade
