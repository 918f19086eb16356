// tests/tokenizer/tokenizer_test_util.h: shared helpers of the tokenizer tests (paths, text, temporary files).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/temp_dir.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade::test {

inline std::filesystem::path shared_path(std::string_view relative) {
    return std::filesystem::path(KASCADE_SHARED_DIR) / relative;
}

inline const std::filesystem::path kTok512 = shared_path("models/stories260K/tok512.bin");
inline const std::filesystem::path kSmolLm2Json = shared_path("models/smollm2-135m-tokenizer/tokenizer.json");
/// Llama 2's tokenizer.json, with the tokenizer_config.json (add_bos_token true) beside it.
inline const std::filesystem::path kLlama2Json = shared_path("models/tokenizers/llama-2/tokenizer.json");
/// Meta's Llama 3 tokenizer.model (tiktoken ranks), with the Instruct model's tokenizer_config.json beside it.
inline const std::filesystem::path kLlama3Model = shared_path("models/tokenizers/llama-3/tokenizer.model");
inline const std::filesystem::path kTinyStories = shared_path("data/tinystories/TinyStories-valid.head.txt");
inline const std::filesystem::path kWikiTest = shared_path("data/wikitext-2/wiki.test.raw");
inline const std::filesystem::path kMobyDick = shared_path("data/moby-dick/pg2701.txt");
/// SentencePiece's word-boundary mark ▁ (U+2581), which stands for a space inside pieces.
inline const std::string kSpace = "\xe2\x96\x81";
/// The node project of the JavaScript reference tokenizers (set up with `cd tests/node && npm ci`).
inline const std::filesystem::path kNodeProject = std::filesystem::path(KASCADE_SOURCE_DIR) / "tests" / "node";

/// The first `min_bytes` of `text`, extended to the end of that line, so that no codepoint or word is cut.
inline std::string head_lines(const std::string& text, std::size_t min_bytes) {
    if (text.size() <= min_bytes) return text;
    const std::size_t newline = text.find('\n', min_bytes);
    return text.substr(0, newline == std::string::npos ? text.size() : newline + 1);
}

/// The cross-checks against independent implementations (node packages, Python's sentencepiece) skip where the
/// reference is not installed, unless KASCADE_REQUIRE_NODE_REFERENCE=1 (scripts/test.sh, CI): then they must run.
inline bool references_required() {
    const char* required = std::getenv("KASCADE_REQUIRE_NODE_REFERENCE");
    return required && std::string(required) == "1";
}

/// Fails the test if `ours` and `reference` differ, showing the first difference with the ids around it and their
/// text (as `tok` decodes them).
inline void expect_same_ids(const std::vector<int32_t>& ours, const std::vector<int32_t>& reference,
                            const Tokenizer& tok, const std::string& what) {
    std::size_t first_diff = 0;
    while (first_diff < ours.size() && first_diff < reference.size() && ours[first_diff] == reference[first_diff]) {
        ++first_diff;
    }
    if (first_diff == ours.size() && first_diff == reference.size()) return;
    const std::size_t from = first_diff > 5 ? first_diff - 5 : 0;
    auto context = [&](const std::vector<int32_t>& ids) {
        const std::size_t to = std::min(ids.size(), first_diff + 5);
        std::string s;
        for (std::size_t i = from; i < to; ++i)
            s += std::to_string(ids[i]) + " '" + tok.decode_piece(-1, ids[i]) + "' ";
        return s;
    };
    ADD_FAILURE() << what << ": ids differ at index " << first_diff << " (ours " << ours.size() << " ids, reference "
                  << reference.size() << ")\n  ours:      " << context(ours) << "\n  reference: " << context(reference);
}

/// Wall time of `fn()` in milliseconds.
template <typename Fn>
double time_ms(Fn&& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace kascade::test
