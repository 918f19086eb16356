// tests/weights/weights_test_util.h: helpers shared by the weight-loading tests: a self-deleting temp directory, raw
// file writing, message matching.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "common/temp_dir.h"
#include "io/weights/model_weights.h"

namespace kascade::test {

/// The fp32 elements of a matrix loaded from an F32 file (whose matrices stay fp32).
inline const float* f32_data(const WeightMatrix& m) {
    EXPECT_EQ(m.dtype, DType::F32);
    return static_cast<const float*>(m.data);
}

/// Every element of a matrix as fp32, whatever its dtype.
inline std::vector<float> matrix_values(const WeightMatrix& m) {
    std::vector<float> values(static_cast<std::size_t>(m.rows) * m.cols);
    for (int r = 0; r < m.rows; ++r) weight_row_to_f32(m, r, values.data() + static_cast<std::size_t>(r) * m.cols);
    return values;
}

inline std::filesystem::path shared_dir() {
    return KASCADE_SHARED_DIR;
}

inline void write_bytes(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A safetensors file from a literal header and data region, for handcrafted (possibly bad) files.
inline std::string safetensors_bytes(const std::string& header_json, const std::string& data) {
    std::string bytes(8, '\0');
    const std::uint64_t n = header_json.size();
    std::memcpy(bytes.data(), &n, 8);
    return bytes + header_json + data;
}

/// The message of the kascade::Error `fn` throws, or "" (and a test failure) if it throws nothing.
inline std::string error_message(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const kascade::Error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a kascade::Error";
    return "";
}

}  // namespace kascade::test
