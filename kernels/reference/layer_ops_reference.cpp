#include "kernels/reference/layer_ops_reference.h"

#include <algorithm>
#include <cmath>

namespace kascade::reference {

std::vector<double> rmsnorm(const float* x, const float* weight, int64_t n_rows, int dim, double eps) {
    std::vector<double> y(static_cast<size_t>(n_rows) * dim);
    for (int64_t r = 0; r < n_rows; ++r) {
        double sum_sq = 0;
        for (int i = 0; i < dim; ++i) sum_sq += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
        const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + eps);
        for (int i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inv_rms * weight[i];
    }
    return y;
}

std::vector<double> swiglu(const float* gate, const float* up, int64_t n) {
    std::vector<double> out(n);
    for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))) * up[i];
    return out;
}

double log_sum_exp(const float* z, int64_t n) {
    const double z_max = *std::max_element(z, z + n);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(z[i] - z_max);
    return z_max + std::log(sum);
}

}  // namespace kascade::reference
