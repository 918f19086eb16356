// pipeline/runtime/forward_stats.h: where a forward pass spends its time. Counters beside timers, so a benchmark
// or an eval can say how much of the time is attention and how much is matrix products.
#pragma once

#include <cstdint>
#include <vector>

namespace kascade {

struct ForwardStats {
    double total_ms = 0;
    double matmul_ms = 0;                    ///< projections, MLP and LM head (Eigen GEMM)
    double attention_ms = 0;                 ///< inside AttentionPolicy::attend
    int64_t tokens = 0;                      ///< positions run through the model
    std::vector<double> layer_attention_ms;  ///< per layer, summed over calls

    void reset() { *this = ForwardStats{}; }
    double other_ms() const { return total_ms - matmul_ms - attention_ms; }
};

}  // namespace kascade
