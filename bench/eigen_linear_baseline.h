// bench/eigen_linear_baseline.h: the fp32 Eigen product the runtime used before kernels/matmul.h (one call per
// weight; rows split over the OpenMP threads, Eigen on each block), kept only as bench_matmul's baseline row.
#pragma once

#include <omp.h>

#include <algorithm>
#include <utility>

#include <Eigen/Core>

namespace kascade::bench {

namespace eigen_detail {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;

constexpr double kParallelMinMacs = 1 << 20;
/// Rows per thread below which splitting by tokens leaves the GEMM too thin; split by output features instead.
constexpr int kMinRowsPerThread = 32;
/// Output-feature blocks are multiples of this, so each thread's slice of W stays aligned to SIMD widths.
constexpr int kFeatureBlockAlign = 16;

/// [begin, end) of part `index` of `count` near-equal parts of [0, total), each a multiple of `align` but the last.
inline std::pair<int, int> part(int total, int count, int index, int align) {
    const int units = (total + align - 1) / align;
    const int begin = std::min(total, units * index / count * align);
    const int end = std::min(total, units * (index + 1) / count * align);
    return {begin, end};
}

/// y[rows r0..r1, features f0..f1] = x[r0..r1] W[f0..f1]^T (+ b), on the calling thread.
inline void linear_block(const float* x, const float* w, const float* b, float* y, int in, int out, int r0, int r1,
                         int f0, int f1) {
    if (r0 >= r1 || f0 >= f1) return;
    ConstMatrixMap xm(x + static_cast<long>(r0) * in, r1 - r0, in);
    ConstMatrixMap wm(w + static_cast<long>(f0) * in, f1 - f0, in);
    Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> ym(y + static_cast<long>(r0) * out + f0, r1 - r0, f1 - f0,
                                                      Eigen::OuterStride<>(out));
    ym.noalias() = xm * wm.transpose();
    if (b != nullptr) ym.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(b + f0, f1 - f0);
}
}  // namespace eigen_detail

/// y [n][out] = x [n][in] W^T (+ b), W [out][in] fp32.
inline void eigen_linear(const float* x, const float* w, const float* b, float* y, int n, int in, int out) {
    // kascade decides the threading of every product itself (see header), so Eigen's own is switched off once.
    using namespace eigen_detail;
    static const bool eigen_single_threaded = [] {
        Eigen::setNbThreads(1);
        return true;
    }();
    (void)eigen_single_threaded;

    const double macs = static_cast<double>(n) * in * out;
    const int threads = macs < kParallelMinMacs ? 1 : omp_get_max_threads();
    if (threads == 1) {
        linear_block(x, w, b, y, in, out, 0, n, 0, out);
        return;
    }
    const bool split_rows = n >= threads * kMinRowsPerThread;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        if (split_rows) {
            const auto [r0, r1] = part(n, nt, t, 1);
            linear_block(x, w, b, y, in, out, r0, r1, 0, out);
        } else {
            const auto [f0, f1] = part(out, nt, t, kFeatureBlockAlign);
            linear_block(x, w, b, y, in, out, 0, n, f0, f1);
        }
    }
}

}  // namespace kascade::bench
