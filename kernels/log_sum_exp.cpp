#include "kernels/log_sum_exp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "kernels/exp_simd.h"

namespace kascade {

double log_sum_exp(const float* z, int64_t n) {
    KASCADE_ASSERT(n >= 1);
    // One pass over memory: each block (L1-sized) is read for its maximum, then again from L1 for its terms, which are
    // taken against the running maximum; when a block raises the maximum the sum so far is rescaled.
    double z_max = -std::numeric_limits<double>::infinity();
    double sum = 0;
    for (int64_t b = 0; b < n; b += kLogSumExpBlock) {
        const int64_t end = std::min(n, b + kLogSumExpBlock);
        float block_max = -std::numeric_limits<float>::infinity();
        // A NaN need not survive the max; it makes its term, hence the sum and the result, NaN.
#pragma omp simd reduction(max : block_max)
        for (int64_t i = b; i < end; ++i) block_max = z[i] > block_max ? z[i] : block_max;
        if (block_max == std::numeric_limits<float>::infinity()) return block_max;
        if (block_max > z_max) {
            sum *= std::exp(z_max - block_max);
            z_max = block_max;
        }
        if (block_max == -std::numeric_limits<float>::infinity()) continue;  // all -inf: adds nothing
        const float shift = static_cast<float>(z_max);
        float block_sum = 0;
#pragma omp simd reduction(+ : block_sum)
        for (int64_t i = b; i < end; ++i) block_sum += exp_simd(z[i] - shift);
        sum += block_sum;
    }
    return z_max + std::log(sum);  // all -inf: -inf + log(0)
}

}  // namespace kascade
