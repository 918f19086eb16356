#include "kernels/reference/matmul_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kascade::reference {

double round_to_bf16(double x) {
    if (!std::isfinite(x) || x == 0) return x;
    // BF16 keeps 8 significant bits: scale |x| so that they are the integer part, round half to even, scale back.
    // Below the smallest normal (2^-126) the spacing stays 2^-133, as for the subnormals.
    int exponent;
    std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
    const int quantum_exponent = std::max(exponent - 8, -133);
    const double scaled = std::ldexp(x, -quantum_exponent);
    const double rounded = std::nearbyint(scaled);  // default rounding mode: to nearest, ties to even
    const double result = std::ldexp(rounded, quantum_exponent);
    return std::abs(result) >= 0x1p128 ? std::copysign(INFINITY, x) : result;  // beyond the float range
}

double bf16_value(uint16_t bits) {
    const uint32_t u = static_cast<uint32_t>(bits) << 16;  // BF16 is the top half of an IEEE float
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

double f16_value(uint16_t bits) {
    const int sign = bits >> 15 ? -1 : 1;
    const int exponent = (bits >> 10) & 0x1f;
    const int mantissa = bits & 0x3ff;
    if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
    if (exponent == 0) return sign * std::ldexp(mantissa, -24);
    return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double weight_value(const MatrixView& w, int row, int col) {
    const size_t index = static_cast<size_t>(row) * w.cols + col;
    switch (w.type) {
        case MatrixType::F32:
            return static_cast<const float*>(w.data)[index];
        case MatrixType::BF16:
            return bf16_value(static_cast<const uint16_t*>(w.data)[index]);
        case MatrixType::F16:
            return f16_value(static_cast<const uint16_t*>(w.data)[index]);
    }
    return NAN;
}

std::vector<double> matmul(const float* x, int n, const MatrixView& w, const float* bias, MatmulPrecision precision) {
    const int rows = w.rows, cols = w.cols;
    std::vector<double> weights(static_cast<size_t>(rows) * cols), inputs(static_cast<size_t>(n) * cols);
    for (int j = 0; j < rows; ++j)
        for (int c = 0; c < cols; ++c) weights[static_cast<size_t>(j) * cols + c] = weight_value(w, j, c);
    const bool round_inputs = w.type == MatrixType::BF16 && precision == MatmulPrecision::Bf16;
    for (size_t k = 0; k < inputs.size(); ++k) inputs[k] = round_inputs ? round_to_bf16(x[k]) : x[k];
    std::vector<double> y(static_cast<size_t>(n) * rows);
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < rows; ++j) {
            double sum = 0;
            for (int c = 0; c < cols; ++c)
                sum += inputs[static_cast<size_t>(i) * cols + c] * weights[static_cast<size_t>(j) * cols + c];
            y[static_cast<size_t>(i) * rows + j] = sum + (bias != nullptr ? bias[j] : 0.0);
        }
    }
    return y;
}

}  // namespace kascade::reference
