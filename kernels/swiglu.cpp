#include "kernels/swiglu.h"

#include "kernels/exp_simd.h"

namespace kascade {

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + exp_simd(-g)) * up[i];
    }
}

}  // namespace kascade
