#include "kernels/rmsnorm.h"

#include <cmath>

namespace kascade {

namespace {
/// Below this many elements a parallel region costs more than it saves (and stalls when the other cores are busy).
constexpr int64_t kParallelMinElements = 1 << 16;
}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int dim, float eps) {
#pragma omp parallel for schedule(static) if (n_rows * dim > kParallelMinElements)
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        double sum_sq = 0;
        for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
        const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
        for (int i = 0; i < dim; ++i) yr[i] = xr[i] * inv_rms * weight[i];
    }
}

}  // namespace kascade
