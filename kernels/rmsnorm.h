// kernels/rmsnorm.h: RMSNorm, y = x / sqrt(mean(x^2) + eps) * weight, row by row, and the same fused with the residual
// add that precedes every norm of a Llama block.
#pragma once

#include <cstdint>

namespace kascade {

/// x, y: [n_rows][dim] (y may alias x); weight: [dim]. Accumulates the mean square in double so long rows of
/// large activations keep full fp32 accuracy.
void rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int dim, float eps);

/// x += delta, then y = rmsnorm(x) (the residual stream updated by a block's output and normed for the next block),
/// in one pass over the rows. x, delta, y: [n_rows][dim]; y must not alias x or delta. x ends bitwise equal to the
/// separate add and y to rmsnorm() of it.
void add_rmsnorm(float* x, const float* delta, const float* weight, float* y, int64_t n_rows, int dim, float eps);

}  // namespace kascade
