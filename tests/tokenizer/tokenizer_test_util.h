// tests/tokenizer/tokenizer_test_util.h: shared helpers of the tokenizer tests (paths, text, temporary files).
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/temp_dir.h"
#include "io/file_util.h"

namespace kascade::test {

inline std::filesystem::path shared_path(std::string_view relative) {
    return std::filesystem::path(KASCADE_SHARED_DIR) / relative;
}

inline const std::filesystem::path kTok512 = shared_path("models/stories260K/tok512.bin");
inline const std::filesystem::path kSmolLm2Json = shared_path("models/smollm2-135m-tokenizer/tokenizer.json");
/// Llama 2's tokenizer.json, with the tokenizer_config.json (add_bos_token true) beside it.
inline const std::filesystem::path kLlama2Json = shared_path("models/tokenizers/llama-2/tokenizer.json");
inline const std::filesystem::path kTinyStories = shared_path("data/tinystories/TinyStories-valid.head.txt");
inline const std::filesystem::path kWikiTest = shared_path("data/wikitext-2/wiki.test.raw");
inline const std::filesystem::path kMobyDick = shared_path("data/moby-dick/pg2701.txt");

/// The first `min_bytes` of `text`, extended to the end of that line, so that no codepoint or word is cut.
inline std::string head_lines(const std::string& text, std::size_t min_bytes) {
    if (text.size() <= min_bytes) return text;
    const std::size_t newline = text.find('\n', min_bytes);
    return text.substr(0, newline == std::string::npos ? text.size() : newline + 1);
}

/// Wall time of `fn()` in milliseconds.
template <typename Fn>
double time_ms(Fn&& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kascade::test
