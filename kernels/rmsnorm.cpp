#include "kernels/rmsnorm.h"

#include <cmath>

#include "kernels/elementwise_parallel.h"

namespace kascade {

namespace {
inline void norm_row(const float* x, const float* weight, float* y, int dim, float eps) {
    double sum_sq = 0;
#pragma omp simd reduction(+ : sum_sq)
    for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
#pragma omp simd
    for (int i = 0; i < dim; ++i) y[i] = x[i] * inv_rms * weight[i];
}
}  // namespace

void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int dim, float eps) {
#pragma omp parallel for schedule(static) if (n_rows * dim > kParallelMinElements)
    for (int64_t r = 0; r < n_rows; ++r) norm_row(x + r * dim, weight, y + r * dim, dim, eps);
}

void add_rmsnorm(float* x, const float* delta, const float* weight, float* y, int64_t n_rows, int dim, float eps) {
#pragma omp parallel for schedule(static) if (n_rows * dim > kParallelMinElements)
    for (int64_t r = 0; r < n_rows; ++r) {
        float* xr = x + r * dim;
        const float* dr = delta + r * dim;
#pragma omp simd
        for (int i = 0; i < dim; ++i) xr[i] += dr[i];
        norm_row(xr, weight, y + r * dim, dim, eps);
    }
}

}  // namespace kascade
