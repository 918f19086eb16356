#include "kernels/log_sum_exp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/exp_simd.h"
#include "kernels/kernel_assert.h"

namespace kascade {

double log_sum_exp(const float* z, int64_t n) {
    KASCADE_KERNEL_ASSERT(n >= 1);
    float z_max = -std::numeric_limits<float>::infinity();
    bool has_nan = false;
#pragma omp simd reduction(max : z_max) reduction(|| : has_nan)
    for (int64_t i = 0; i < n; ++i) {
        z_max = std::max(z_max, z[i]);
        has_nan = has_nan || z[i] != z[i];
    }
    if (has_nan) return std::numeric_limits<double>::quiet_NaN();
    if (std::isinf(z_max)) return z_max;  // all -inf, or a +inf that dominates
    double sum = 0;
    for (int64_t b = 0; b < n; b += kLogSumExpBlock) {
        const int64_t end = std::min(n, b + kLogSumExpBlock);
        float block_sum = 0;
#pragma omp simd reduction(+ : block_sum)
        for (int64_t i = b; i < end; ++i) block_sum += exp_simd(z[i] - z_max);
        sum += block_sum;
    }
    return z_max + std::log(sum);
}

}  // namespace kascade
