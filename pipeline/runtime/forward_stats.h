// pipeline/runtime/forward_stats.h: where a forward pass spends its time. Counters beside timers, so a benchmark
// or an eval can say how much of the time is attention, how much matrix products, and what the rest is made of.
#pragma once

#include <cstdint>
#include <vector>

namespace kascade {

struct ForwardStats {
    double total_ms = 0;
    double matmul_ms = 0;     ///< projections, MLP and LM head (kernels/matmul.h)
    double attention_ms = 0;  ///< inside AttentionPolicy::attend
    // The rest, by phase (their sum is close to other_ms(); the remainder is loop and call overhead):
    double norm_ms = 0;                      ///< RMSNorms with their fused residual adds, q/k norms
    double rope_kv_ms = 0;                   ///< RoPE on q and k and the copy of k and v into the KV cache
    double activation_ms = 0;                ///< SwiGLU
    double embed_ms = 0;                     ///< embedding lookup
    int64_t tokens = 0;                      ///< positions run through the model
    std::vector<double> layer_attention_ms;  ///< per layer, summed over calls

    void reset() { *this = ForwardStats{}; }
    double other_ms() const { return total_ms - matmul_ms - attention_ms; }
};

}  // namespace kascade
