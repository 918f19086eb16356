// tests/tokenizer/tiktoken_reference_test.cpp: Llama 3 tokenizer.model ids against an independent implementation,
// the npm package tiktoken (OpenAI's Rust tiktoken as WebAssembly), run under node from tests/node
// (tiktoken_encode.mjs, set up with `npm ci`) with the ranks of the same file, Meta's split pattern and special
// tokens.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

/// Why the reference cannot run here, or empty if it can.
std::string tiktoken_missing() {
    if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
    if (!std::filesystem::exists(test::kNodeProject / "node_modules" / "tiktoken")) {
        return "the node project is not installed (run: cd tests/node && npm ci)";
    }
    return {};
}

/// The ids tiktoken gives for `text` with the ranks of `model`.
std::vector<int32_t> tiktoken_ids(const std::filesystem::path& model, const std::string& text,
                                  const test::TempDir& dir) {
    const auto text_file = dir.write("text.txt", text);
    const auto out_file = dir.path() / "ids.json";
    const std::string command = "node '" + (test::kNodeProject / "tiktoken_encode.mjs").string() + "' '" +
                                model.string() + "' '" + text_file.string() + "' > '" + out_file.string() + "'";
    const int status = std::system(command.c_str());
    EXPECT_EQ(status, 0) << command;
    if (status != 0) return {};
    return nlohmann::json::parse(read_file(out_file)).get<std::vector<int32_t>>();
}

class TiktokenReferenceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string missing = tiktoken_missing();
        if (missing.empty()) return;
        if (test::references_required()) FAIL() << "KASCADE_REQUIRE_NODE_REFERENCE=1 but " << missing;
        GTEST_SKIP() << "the tiktoken reference is unavailable: " << missing;
    }
};

TEST_F(TiktokenReferenceTest, Llama3MatchesOnRealText) {
    // The whole of each text: TinyStories (ASCII prose), WikiText-2 (numbers, " @-@ ", accents, CJK, "\n \n"
    // runs) and Moby Dick ("\r\n" line ends, long punctuation runs); 2.7 MB, about 690,000 ids.
    const auto tok = load_tokenizer(test::kLlama3Model);
    test::TempDir dir;
    std::size_t total = 0;
    for (const auto& path : {test::kTinyStories, test::kWikiTest, test::kMobyDick}) {
        const std::string text = read_file(path);
        const std::vector<int32_t> ours = tok->encode(text);
        total += ours.size();
        test::expect_same_ids(ours, tiktoken_ids(test::kLlama3Model, text, dir), *tok, path.filename().string());
    }
    std::printf("compared %zu ids with tiktoken\n", total);
}

TEST_F(TiktokenReferenceTest, Llama3MatchesOnEdgeCases) {
    const auto tok = load_tokenizer(test::kLlama3Model);
    test::TempDir dir;
    // Special tokens glued to text and broken ones; digit runs of 1..10 (split in threes) and non-ASCII numbers;
    // contractions in both cases (the pattern's (?i:...)); whitespace runs before words, before newlines, at the
    // end, "\r\n", tabs, no-break and ideographic spaces; accents, combining marks, CJK, Cyrillic, Arabic, emoji
    // with modifiers and ZWJ; punctuation runs followed by newlines.
    const std::string text =
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou're helpful.<|eot_id|>"
        "<|reserved_special_token_250|><|eot_id|<|eot_id|>x 1 12 123 1234 12345 1234567890 3.14159 ½ ² ٣ ①\n"
        "IT'S it's THEY'LL we'VE I'M you'D 'S'T\n   leading\t\ttabs  \r\n\r\n  trailing   \n \n\n"
        "\xc2\xa0nbsp\xe3\x80\x80ideographic Grüße naïve café e\xcc\x81 日本語のテキスト Привет мир مرحبا "
        "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
        "...!!!???\n\n--- ***\n\t\n    ";
    test::expect_same_ids(tok->encode(text), tiktoken_ids(test::kLlama3Model, text, dir), *tok, "edge cases");
}

TEST_F(TiktokenReferenceTest, SmallRankFileMatches) {
    // A rank file of the 256 bytes, then "bc", "ab" and "abc" (ranks 256, 257, 258): merging order, the whole-piece
    // lookup and special ids right after the last rank, on a file that is not Llama 3's.
    const std::string llama3 = read_file(test::kLlama3Model);
    // Llama 3's first 256 ranks are the 256 single bytes (in GPT-2's order): reuse those lines.
    std::size_t pos = 0;
    for (int line = 0; line < 256; ++line) pos = llama3.find('\n', pos) + 1;
    const std::string ranks = llama3.substr(0, pos) + "YmM= 256\nYWI= 257\nYWJj 258\n";
    test::TempDir dir;
    const auto path = dir.write("tokenizer.model", ranks);
    const auto tok = load_tokenizer(path);
    ASSERT_EQ(tok->vocab_size(), 259 + 256);
    const std::string text = "abc abcabc xabc bcab <|begin_of_text|>aab<|end_of_text|>";
    test::expect_same_ids(tok->encode(text), tiktoken_ids(path, text, dir), *tok, "small rank file");
}

}  // namespace
}  // namespace kascade
