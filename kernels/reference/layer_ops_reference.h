// kernels/reference/layer_ops_reference.h: slow, obviously-correct double-precision twins of the small per-element
// kernels of a transformer layer (kernels/rmsnorm.h, swiglu.h, exp_simd.h, log_sum_exp.h), used only by the tests.
#pragma once

#include <cstdint>
#include <vector>

namespace kascade::reference {

/// [n_rows][dim]: x / sqrt(mean(x^2) + eps) * weight, in double.
std::vector<double> rmsnorm(const float* x, const float* weight, int64_t n_rows, int dim, double eps);

/// [n]: silu(gate) * up = gate / (1 + e^-gate) * up, in double.
std::vector<double> swiglu(const float* gate, const float* up, int64_t n);

/// log(sum_i e^{z_i}) in double with the largest value factored out.
double log_sum_exp(const float* z, int64_t n);

}  // namespace kascade::reference
