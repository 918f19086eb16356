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

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "io/error.h"

namespace kascade::test {

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
