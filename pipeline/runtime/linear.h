// pipeline/runtime/linear.h: the matrix product of a linear layer, y = x W^T (+ b), with W in nn.Linear layout.
#pragma once

namespace kascade {

/// x: [n][in], w: [out][in], b: [out] or null, y: [n][out].
/// Threading is explicit: products below ~1M multiply-adds run on one thread (a parallel region would cost more,
/// and stalls badly when the other cores are busy); larger ones are split into one block per OpenMP thread, by
/// token rows when there are many, else by output features (decode), and Eigen computes each block on one thread.
void linear(const float* x, const float* w, const float* b, float* y, int n, int in, int out);

}  // namespace kascade
