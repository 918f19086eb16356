#include "kernels/swiglu.h"

#include <algorithm>

#include "kernels/elementwise_parallel.h"
#include "kernels/exp_simd.h"

namespace kascade {

namespace {

void swiglu_range(const float* gate, const float* up, float* out, int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + exp_simd(-g)) * up[i];
    }
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    if (n < kParallelMinElements) {
        // Without a parallel region at all: `omp parallel for simd if (false)` measured 5 us for these 1536 elements
        // (10 us with 2 threads configured) against 1 us for the plain loop.
        swiglu_range(gate, up, out, 0, n);
        return;
    }
    constexpr int64_t kChunk = 4096;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n; c += kChunk) swiglu_range(gate, up, out, c, std::min(n, c + kChunk));
}

}  // namespace kascade
