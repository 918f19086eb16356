// pipeline/runtime/weight_matrix_view.h: a loaded weight matrix (io/weights) as the matrix-product kernels read it
// (kernels/matmul.h). The two layers name the same three element types separately because neither depends on the
// other; this is the one place that maps between them.
#pragma once

#include "io/weights/model_weights.h"
#include "kernels/matmul.h"

namespace kascade {

inline MatrixType matrix_type(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return MatrixType::F32;
        case DType::BF16:
            return MatrixType::BF16;
        case DType::F16:
            return MatrixType::F16;
    }
    return MatrixType::F32;
}

inline MatrixView matrix_view(const WeightMatrix& m) {
    return MatrixView{matrix_type(m.dtype), m.data, m.rows, m.cols};
}

}  // namespace kascade
