// kernels/matmul.h: the matrix products of a linear layer, y = x W^T (+ bias), with the weight matrix read in place
// in its file dtype (F32, BF16 or F16; e.g. memory-mapped) and never expanded to fp32 as a whole.
//
// Numerics (each output element is one dot product over the input features, then + bias), by MatmulPrecision:
//   Exact         fp32 activations times the weights widened to fp32 a block at a time (BF16 by a shift, F16 by
//                 F16C), fp32 accumulation, for every dtype: the result a fp32 model would give.
//   Bf16          with BF16 weights, the activations are rounded to BF16 (round-to-nearest-even) once per call;
//                 products of two BF16 values are exact in fp32; accumulation in fp32 (what vdpbf16ps does, as
//                 llama.cpp and oneDNN do): about twice the arithmetic rate, at the price of an input rounding of
//                 2^-9 relative. On the AVX512-BF16 path the hardware also treats fp32 denormals as zero (in the
//                 rounding of the activations and in the accumulator), which moves a result by at most ~1e-38
//                 absolute. F32 and F16 weights are computed as in Exact.
// The accumulation order of an element depends only on the number of input features and the compiled path:
// partial sums in vector lanes over the features, combined by a fixed pairwise tree. Hence each output element is
// bitwise identical whatever n is (a row computed alone equals the same row inside a batch of 512: prefill and
// decode agree) and whatever the OpenMP thread count is. Different compiled paths (AVX512-BF16, AVX2/FMA, portable
// scalar: chosen at compile time, see matmul_path()) round differently, within fp32 accuracy of each other.
// Inf and NaN in x or W propagate as in the exact sum.
//
// Threading: all omp_get_max_threads() threads, work split dynamically over blocks of weight rows (and of input rows
// when the weight has few rows), so no thread idles for any shape; products below ~1M multiply-adds and 256 KiB of
// weights run on the calling thread. Decode (n = 1) streams each weight element once, and so does a decode batch of up
// to 8 rows on the AVX-512 and AVX2 paths (one tile over all its rows, a block of columns at a time). No weight matrix
// is copied: the memory used is the converted activations (n x cols x 2 bytes for BF16 weights) and, for many rows
// with widened weights, one panel widened to fp32 per thread, for the duration of the call.
#pragma once

#include <cstddef>
#include <span>
#include "base/modes.h"

namespace kascade {

/// Element type of a weight matrix as stored in the model file.
enum class MatrixType { F32, BF16, F16 };

/// "f32", "bf16", "f16".
const char* matrix_type_name(MatrixType type);

/// Bytes per element of a matrix type (4 or 2).
size_t matrix_type_size(MatrixType type);

/// A row-major weight matrix [rows][cols] in nn.Linear layout (rows = output features, cols = input features),
/// read in place (e.g. from a memory-mapped file; any 2-byte alignment for BF16/F16, 4-byte for F32).
struct MatrixView {
    MatrixType type = MatrixType::F32;
    const void* data = nullptr;  ///< rows * cols elements of `type`
    int rows = 0;
    int cols = 0;
};

// MatmulPrecision, how a product treats its activations (see the numerics above), and its names: base/modes.h.

/// One product of a fused call: y = x W^T (+ bias); y is [n][w.rows] with row stride y_stride (0 = w.rows).
struct MatmulTarget {
    MatrixView w;
    const float* bias = nullptr;  ///< [w.rows] or null
    float* y = nullptr;           ///< [n][y_stride]; only the first w.rows floats of each row are written
    int y_stride = 0;
};

/// Every target shares the input x [n][cols] (fused q/k/v or gate/up): x is converted once, one parallel region.
/// All targets must have the same cols; their types may differ. n >= 0; y must not overlap x.
void matmul(const float* x, int n, std::span<const MatmulTarget> targets,
            MatmulPrecision precision = MatmulPrecision::Exact);

/// y [n][w.rows] = x [n][w.cols] W^T (+ bias [w.rows] if not null).
void matmul(const float* x, int n, const MatrixView& w, const float* bias, float* y,
            MatmulPrecision precision = MatmulPrecision::Exact);

/// The instruction path compiled in: "avx512bf16", "avx2" or "scalar".
const char* matmul_path();

}  // namespace kascade
