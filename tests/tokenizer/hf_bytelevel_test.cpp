// tests/tokenizer/hf_bytelevel_test.cpp: the SmolLM2 tokenizer.json (byte-level BPE) on real text.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/byte_level.h"
#include "io/tokenizer/hf_tokenizer.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using test::kMobyDick;
using test::kSmolLm2Json;
using test::kWikiTest;

class SmolLm2TokenizerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { tok_ = load_tokenizer(kSmolLm2Json).release(); }
    static void TearDownTestSuite() {
        delete tok_;
        tok_ = nullptr;
    }
    static Tokenizer* tok_;
};
Tokenizer* SmolLm2TokenizerTest::tok_ = nullptr;

TEST(ByteLevel, Gpt2Mapping) {
    const auto& chars = byte_level_chars();
    EXPECT_EQ(chars['A'], "A");
    EXPECT_EQ(chars[' '], "\xc4\xa0");   // Ġ U+0120
    EXPECT_EQ(chars['\n'], "\xc4\x8a");  // Ċ U+010A
    EXPECT_EQ(chars[0], "\xc4\x80");     // Ā U+0100
    EXPECT_EQ(chars[0xAD], "\xc5\x83");  // the soft hyphen is not printable: Ń U+0143, the last mapped character
    EXPECT_EQ(chars[0xE9], "\xc3\xa9");  // é maps to itself
    std::string all;
    for (const auto& c : chars) all += c;
    std::string bytes;
    ASSERT_TRUE(byte_level_decode(all, bytes));
    ASSERT_EQ(bytes.size(), 256u);
    for (int b = 0; b < 256; ++b) EXPECT_EQ(static_cast<unsigned char>(bytes[b]), b);
    std::string ignored;
    EXPECT_FALSE(byte_level_decode("\xe2\x96\x81", ignored));  // ▁ is not in the mapping
}

TEST_F(SmolLm2TokenizerTest, Metadata) {
    EXPECT_EQ(tok_->kind(), "hf-bpe-bytelevel");
    EXPECT_EQ(tok_->vocab_size(), 49152);
    EXPECT_EQ(tok_->eos_id(), 0);  // <|endoftext|>; there is no tokenizer_config.json beside it and no <s>
    EXPECT_EQ(tok_->bos_id(), -1);
}

// Ids from the Hugging Face reference (the @huggingface/tokenizers package, see node_reference_test.cpp).
TEST_F(SmolLm2TokenizerTest, KnownIds) {
    EXPECT_EQ(tok_->encode("Hello World<|endoftext|> 12345 it's  ok\n\nfoo"),
              (std::vector<int32_t>{19556, 2260, 0, 216, 33, 34, 35, 36, 37, 357, 506, 216, 10907, 198, 198, 15236}));
    EXPECT_TRUE(tok_->encode("").empty());
}

TEST_F(SmolLm2TokenizerTest, SpecialTokensAreNeverSplit) {
    EXPECT_EQ(tok_->encode("<|endoftext|>"), (std::vector<int32_t>{0}));
    EXPECT_EQ(tok_->encode("<|im_start|>user\nhi<|im_end|>"), (std::vector<int32_t>{1, 4093, 198, 6004, 2}));
    const std::vector<int32_t> ids = tok_->encode("a<|endoftext|><|endoftext|>b");
    ASSERT_EQ(ids.size(), 4u);
    EXPECT_EQ(ids[1], 0);
    EXPECT_EQ(ids[2], 0);
    EXPECT_EQ(tok_->decode(ids), "a<|endoftext|><|endoftext|>b");
    // A broken special token is plain text.
    EXPECT_GT(tok_->encode("<|endoftext|").size(), 1u);
}

// Hugging Face's Digits pre-tokenizer isolates every char::is_numeric character (the Unicode N category), not
// only ASCII digits, so " ½" is two words where the GPT-2 regex alone would keep one.
TEST_F(SmolLm2TokenizerTest, DigitsSplitsEveryUnicodeNumber) {
    for (const std::string number : {"½", "²", "٣"}) {
        std::vector<int32_t> expected = tok_->encode(" ");
        const std::vector<int32_t> alone = tok_->encode(number);
        expected.insert(expected.end(), alone.begin(), alone.end());
        EXPECT_EQ(tok_->encode(" " + number), expected) << number;
    }
    EXPECT_EQ(tok_->encode("x42"), (std::vector<int32_t>{104, 36, 34}));  // "x", "4", "2"
}

TEST_F(SmolLm2TokenizerTest, DecodePieceConcatenatesToDecode) {
    const std::string text = "Grüße, 世界! \xf0\x9f\x98\x80 x";  // multi-byte characters split across tokens
    const std::vector<int32_t> ids = tok_->encode(text);
    std::string streamed;
    int32_t prev = -1;
    for (const int32_t id : ids) {
        streamed += tok_->decode_piece(prev, id);
        prev = id;
    }
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(tok_->decode(ids), text);
    EXPECT_THROW(tok_->decode_piece(-1, 49152), Error);
}

TEST_F(SmolLm2TokenizerTest, RoundTripsWholeFiles) {
    for (const auto& path : {kWikiTest, kMobyDick}) {
        const std::string text = read_file(path);
        std::vector<int32_t> ids;
        const double ms = test::time_ms([&] { ids = tok_->encode(text); });
        std::printf("[ timing ] SmolLM2 tokenizer.json encode of %s: %zu bytes -> %zu tokens in %.1f ms (%.2f MB/s)\n",
                    path.filename().c_str(), text.size(), ids.size(), ms, text.size() / 1e3 / ms);
        EXPECT_TRUE(tok_->decode(ids) == text) << path;
    }
}

}  // namespace
}  // namespace kascade
