// pipeline/runtime/linear.h: the matrix product of a linear layer, y = x W^T (+ b), with W in nn.Linear layout.
#pragma once

namespace kascade {

/// x: [n][in], w: [out][in], b: [out] or null, y: [n][out]. Multi-row inputs use Eigen's parallel GEMM; single rows
/// (decode) split the output features across OpenMP threads, which Eigen's GEMV does not do by itself.
void linear(const float* x, const float* w, const float* b, float* y, int n, int in, int out);

}  // namespace kascade
