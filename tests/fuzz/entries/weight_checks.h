// tests/fuzz/entries/weight_checks.h: what the entries that load a checkpoint do with every weight of the loaded
// model: check its shape against the config and read all of it, so a view reaching past the file faults in the entry.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "entries/fuzz_support.h"
#include "io/weights/model_weights.h"

namespace kascade::fuzz {

/// Checks that `m` is [rows, cols] and converts every row of it to fp32.
inline void read_matrix(const WeightMatrix& m, int rows, int cols, std::string_view what) {
    require(m.data != nullptr && m.rows == rows && m.cols == cols,
            fmt::format("{}: [{}, {}] where the config says [{}, {}]", what, m.rows, m.cols, rows, cols));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int r = 0; r < rows; ++r) weight_row_to_f32(m, r, row.data());
}

/// Checks that the vector is there and returns the sum of its n elements (reading every one).
inline float read_vector(const float* v, int n, std::string_view what) {
    require(v != nullptr, fmt::format("{} is missing", what));
    float sum = 0;
    for (int i = 0; i < n; ++i) sum += v[i];
    return sum;
}

}  // namespace kascade::fuzz
