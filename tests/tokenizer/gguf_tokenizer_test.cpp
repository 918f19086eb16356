// tests/tokenizer/gguf_tokenizer_test.cpp: the tokenizer a GGUF file embeds against two references on a text of
// stories, WikiText markup, Moby Dick and Unicode: the ids llama.cpp's llama-tokenize gives for the same file
// (stored beside it by scripts/make_gguf_fixtures.sh), and the ids of the tokenizer file the GGUF vocabulary was
// converted from, read by kascade's own reader of that format (checked against llama2.c and npm elsewhere).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(KASCADE_SOURCE_DIR) / "tests/fixtures/gguf";
const fs::path kShared = KASCADE_SHARED_DIR;

std::vector<int32_t> read_ids(const fs::path& path) {
    std::ifstream in(path);
    std::vector<int32_t> ids;
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
}

// The first position where two id lists differ, for a readable failure.
std::string first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    if (i == a.size() && i == b.size()) return "equal";
    return "first difference at " + std::to_string(i) + " of " + std::to_string(a.size()) + " / " +
           std::to_string(b.size());
}

TEST(GgufTokenizer, SentencePieceVocabularyEqualsLlamaCppAndTheLlama2cTokenizer) {
    const fs::path model = kFixtures / "stories260K-f32.gguf";
    const auto tokenizer = load_tokenizer(model);
    EXPECT_EQ(tokenizer->kind(), "gguf-llama");
    EXPECT_EQ(tokenizer->vocab_size(), 512);
    EXPECT_EQ(tokenizer->bos_id(), 1);
    EXPECT_EQ(tokenizer->eos_id(), 2);
    EXPECT_EQ(tokenizer->adds_bos_token(), true);  // llama.cpp's default for a SentencePiece vocabulary

    const std::string text = read_file(kFixtures / "tokenizer-text.txt");
    const std::vector<int32_t> ids = tokenizer->encode(text);
    const std::vector<int32_t> llama_cpp = read_ids(kFixtures / "stories260K-f32.llama-tokenize.txt");
    ASSERT_GT(llama_cpp.size(), 3000u);
    EXPECT_EQ(ids, llama_cpp) << first_difference(ids, llama_cpp);
    const std::vector<int32_t> llama2c = load_tokenizer(kShared / "models/stories260K/tok512.bin")->encode(text);
    EXPECT_EQ(ids, llama2c) << first_difference(ids, llama2c);
    EXPECT_EQ(tokenizer->decode(ids), text);
}

TEST(GgufTokenizer, ByteLevelBpeVocabularyEqualsLlamaCppAndTheTokenizerJson) {
    const fs::path model = kFixtures / "random-bpe-q4_k_m.gguf";
    const auto tokenizer = load_tokenizer(model);
    EXPECT_EQ(tokenizer->kind(), "gguf-gpt2");
    EXPECT_EQ(tokenizer->vocab_size(), 512);
    EXPECT_EQ(tokenizer->bos_id(), 0);
    EXPECT_EQ(tokenizer->adds_bos_token(), false);  // llama.cpp's default for pre-tokenizer "smollm"

    const std::string text = read_file(kFixtures / "tokenizer-text.txt");
    const std::vector<int32_t> ids = tokenizer->encode(text);
    const std::vector<int32_t> llama_cpp = read_ids(kFixtures / "random-bpe-q4_k_m.llama-tokenize.txt");
    ASSERT_GT(llama_cpp.size(), 3000u);
    EXPECT_EQ(ids, llama_cpp) << first_difference(ids, llama_cpp);
    const std::vector<int32_t> json = load_tokenizer(kFixtures / "random-bpe-tokenizer.json")->encode(text);
    EXPECT_EQ(ids, json) << first_difference(ids, json);
    EXPECT_EQ(tokenizer->decode(ids), text);
    // A control token written in the text is that token, as llama.cpp (parse_special) and Hugging Face read it.
    EXPECT_EQ(tokenizer->encode("<|im_start|>"), std::vector<int32_t>{1});
}

TEST(GgufTokenizer, AGgufModelIsItsOwnTokenizer) {
    const fs::path model = kFixtures / "stories260K-q8_0.gguf";
    EXPECT_EQ(find_tokenizer_for_model(model), model);
}

TEST(GgufTokenizer, AFileWithoutAVocabularyIsRefusedNamingTheKey) {
    const fs::path path = kFixtures / "dequant-types.gguf";  // tensors only
    try {
        load_tokenizer(path);
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(path.string()), std::string::npos) << m;
        EXPECT_NE(m.find("\"tokenizer.ggml.model\" is missing"), std::string::npos) << m;
    }
}

}  // namespace
}  // namespace kascade
