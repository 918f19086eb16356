// tests/tokenizer/hf_llama2_test.cpp: Llama 2's tokenizer.json (SentencePiece-style BPE with byte fallback, whose
// merges name tokens that contain spaces) and the tokenizer_config.json beside it, on real text.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/file_util.h"
#include "io/tokenizer/hf_tokenizer.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using test::kLlama2Json;

class Llama2TokenizerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { tok_ = new HfTokenizer(kLlama2Json, read_file(kLlama2Json)); }
    static void TearDownTestSuite() {
        delete tok_;
        tok_ = nullptr;
    }
    static HfTokenizer* tok_;
};
HfTokenizer* Llama2TokenizerTest::tok_ = nullptr;

TEST_F(Llama2TokenizerTest, Metadata) {
    EXPECT_EQ(tok_->kind(), "hf-bpe-sentencepiece");
    EXPECT_EQ(tok_->vocab_size(), 32000);
    EXPECT_EQ(tok_->bos_id(), 1);  // <s>, as tokenizer_config.json names it
    EXPECT_EQ(tok_->eos_id(), 2);  // </s>
    EXPECT_EQ(tok_->adds_bos_token(), std::optional<bool>(true));
    EXPECT_EQ(tok_->adds_eos_token(), std::optional<bool>(false));
}

// The merges whose text has several spaces (model.merges[18917] = "   ", [38142] = "     ", [42805] = "▁  ") are
// read as the one split whose halves and their concatenation are all tokens: " " + " ", "  " + "  ", "▁" + " ".
// Their tokens are never formed from text (the normalizer turns every space into "▁"), so only loading shows them.
TEST_F(Llama2TokenizerTest, MergesOfTokensWithSpaces) {
    EXPECT_EQ(tok_->token_id(" "), 30081);
    EXPECT_EQ(tok_->token_id("  "), 8655);
    EXPECT_EQ(tok_->token_id("    "), 17891);
    EXPECT_EQ(tok_->token_id("\xe2\x96\x81 "), 20246);
    // Every space is "▁" (29871) to BPE, never a token with a plain space.
    EXPECT_EQ(tok_->encode("a  b"), (std::vector<int32_t>{263, 29871, 289}));
}

// Ids from the JavaScript reference (tests/node/encode.mjs) for these strings.
TEST_F(Llama2TokenizerTest, KnownIds) {
    EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int32_t>{15043, 3186}));
    // <s> is a "normalized" added token: found as the normalizer writes it, "▁<s>", so only at the start or after a
    // space; glued to a word it is plain text.
    EXPECT_EQ(tok_->encode("<s>hello</s> world"), (std::vector<int32_t>{1, 12199, 829, 29879, 29958, 3186}));
    // Byte fallback: 😀 has no piece; its four UTF-8 bytes are <0xF0> <0x9F> <0x98> <0x80> (3 + byte).
    EXPECT_EQ(tok_->encode("\xf0\x9f\x98\x80"), (std::vector<int32_t>{29871, 243, 162, 155, 131}));
    EXPECT_TRUE(tok_->encode("").empty());
}

TEST_F(Llama2TokenizerTest, RoundTripsWholeFiles) {
    for (const auto& path : {test::kWikiTest, test::kMobyDick}) {
        const std::string text = read_file(path);
        std::vector<int32_t> ids;
        const double ms = test::time_ms([&] { ids = tok_->encode(text); });
        std::printf("[ timing ] Llama 2 tokenizer.json encode of %s: %zu bytes -> %zu tokens in %.1f ms (%.2f MB/s)\n",
                    path.filename().c_str(), text.size(), ids.size(), ms, text.size() / 1e3 / ms);
        EXPECT_TRUE(tok_->decode(ids) == text) << path;
    }
}

}  // namespace
}  // namespace kascade
