// kernels/rmsnorm.h: RMSNorm, y = x / sqrt(mean(x^2) + eps) * weight, row by row.
#pragma once

#include <cstdint>

namespace kascade {

/// x, y: [n_rows][dim] (y may alias x); weight: [dim]. Accumulates the mean square in double so long rows of
/// large activations keep full fp32 accuracy.
void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int dim, float eps);

}  // namespace kascade
