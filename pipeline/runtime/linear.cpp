#include "pipeline/runtime/linear.h"

#include <Eigen/Core>

namespace kascade {

namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using MatrixMap = Eigen::Map<RowMatrix>;
constexpr int kGemvRowsPerChunk = 256;
/// A matrix-vector product smaller than this runs on one thread: the parallel region would cost more.
constexpr long kGemvParallelMinElements = 1 << 18;
}  // namespace

void linear(const float* x, const float* w, const float* b, float* y, int n, int in, int out) {
    ConstMatrixMap xm(x, n, in);
    MatrixMap ym(y, n, out);
    if (n == 1) {
        const int n_chunks = (out + kGemvRowsPerChunk - 1) / kGemvRowsPerChunk;
#pragma omp parallel for schedule(static) if (n_chunks > 1 && static_cast<long>(out) * in > kGemvParallelMinElements)
        for (int c = 0; c < n_chunks; ++c) {
            const int row0 = c * kGemvRowsPerChunk;
            const int rows = std::min(kGemvRowsPerChunk, out - row0);
            ConstMatrixMap wm(w + static_cast<long>(row0) * in, rows, in);
            ym.block(0, row0, 1, rows).noalias() = xm * wm.transpose();
        }
    } else {
        ConstMatrixMap wm(w, out, in);
        ym.noalias() = xm * wm.transpose();
    }
    if (b != nullptr) ym.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(b, out);
}

}  // namespace kascade
