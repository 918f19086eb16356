// kernels/reference/matmul_reference.h: slow, obviously-correct double-precision twin of kernels/matmul.h, used
// only by the tests. It applies the same declared input rounding as the kernel (activations rounded to BF16,
// nearest-even, when the weights are BF16 and the precision is Bf16) and is otherwise exact: weights decoded exactly,
// products and sums in double, one rounding at the end only when the caller converts to float.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/matmul.h"

namespace kascade::reference {

/// x rounded to the nearest BF16 value, ties to even (computed in double arithmetic, not by bit tricks); values
/// beyond the largest BF16 round to infinity; NaN and infinities are returned unchanged.
double round_to_bf16(double x);

/// Exact value of a BF16 / F16 bit pattern.
double bf16_value(uint16_t bits);
double f16_value(uint16_t bits);

/// Element (row, col) of a weight matrix, exact.
double weight_value(const MatrixView& w, int row, int col);

/// y [n][w.rows] = x [n][w.cols] W^T (+ bias), in double; with MatmulPrecision::Bf16 and BF16 weights the
/// activations are rounded to BF16 first.
std::vector<double> matmul(const float* x, int n, const MatrixView& w, const float* bias,
                           MatmulPrecision precision = MatmulPrecision::Exact);

}  // namespace kascade::reference
