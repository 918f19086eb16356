// tests/tokenizer/llama2c_tokenizer_test.cpp: llama2.c tokenizer.bin against run.c's encode()/decode().
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/llama2c_tokenizer.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using test::head_lines;
using test::kTinyStories;
using test::kTok512;
using test::kWikiTest;

/// A line-by-line transcription of llama2.c run.c encode() (without BOS/EOS): O(n^2), only for small texts.
std::vector<int32_t> run_c_encode(const Llama2cTokenizer& tok, std::string_view text) {
    std::map<std::string, int32_t> sorted_vocab;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) sorted_vocab.try_emplace(tok.piece(id), id);
    auto str_lookup = [&](const std::string& s) {
        auto it = sorted_vocab.find(s);
        return it == sorted_vocab.end() ? -1 : it->second;
    };
    std::vector<int32_t> tokens;
    if (!text.empty()) tokens.push_back(str_lookup(" "));
    std::string str_buffer;
    for (std::size_t c = 0; c < text.size(); ++c) {
        if ((text[c] & 0xC0) != 0x80) str_buffer.clear();
        str_buffer += text[c];
        const bool next_is_continuation = c + 1 < text.size() && (text[c + 1] & 0xC0) == 0x80;
        if (next_is_continuation && str_buffer.size() < 4) continue;
        const int32_t id = str_lookup(str_buffer);
        if (id != -1) {
            tokens.push_back(id);
        } else {
            for (const char b : str_buffer) tokens.push_back(static_cast<unsigned char>(b) + 3);
        }
        str_buffer.clear();
    }
    while (true) {
        float best_score = -1e10f;
        int32_t best_id = -1;
        int64_t best_idx = -1;
        for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
            const int32_t id = str_lookup(tok.piece(tokens[i]) + tok.piece(tokens[i + 1]));
            if (id != -1 && tok.score(id) > best_score) {
                best_score = tok.score(id);
                best_id = id;
                best_idx = static_cast<int64_t>(i);
            }
        }
        if (best_idx == -1) break;
        tokens[best_idx] = best_id;
        tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
}

class Llama2cTokenizerTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { tok_ = new Llama2cTokenizer(kTok512, read_file(kTok512)); }
    static void TearDownTestSuite() {
        delete tok_;
        tok_ = nullptr;
    }
    static Llama2cTokenizer* tok_;
};
Llama2cTokenizer* Llama2cTokenizerTest::tok_ = nullptr;

TEST_F(Llama2cTokenizerTest, ReadsTok512) {
    EXPECT_EQ(tok_->vocab_size(), 512);
    EXPECT_EQ(tok_->max_token_length(), 7);
    EXPECT_EQ(tok_->piece(0), "<unk>");
    EXPECT_EQ(tok_->piece(1), "\n<s>\n");
    EXPECT_EQ(tok_->piece(2), "\n</s>\n");
    EXPECT_EQ(tok_->piece(3), "<0x00>");
    EXPECT_EQ(tok_->piece(258), "<0xFF>");
    EXPECT_EQ(tok_->piece(259), " t");
    EXPECT_EQ(tok_->bos_id(), 1);
    EXPECT_EQ(tok_->eos_id(), 2);
    EXPECT_EQ(tok_->kind(), "llama2c-bin");
}

// Ids derived once with a Python transcription of run.c and checked piece by piece (shown in the comments).
TEST_F(Llama2cTokenizerTest, EncodesKnownSentences) {
    // " Once"," upon"," a"," time",","," there"," was"," a"," little"," g","ir","l"," named"," Lily","."
    EXPECT_EQ(tok_->encode("Once upon a time, there was a little girl named Lily."),
              (std::vector<int32_t>{403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}));
    // " He","ll","o"," w","or","ld"
    EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int32_t>{346, 306, 414, 263, 304, 341}));
    // " c","a","f","é"," ", <0xC3>,<0xBC> (ü is not a token: byte fallback, byte + 3), " ", 日 and 本 as bytes
    EXPECT_EQ(tok_->encode("café ü 日本"),
              (std::vector<int32_t>{280, 412, 431, 485, 410, 198, 191, 410, 233, 154, 168, 233, 159, 175}));
    // " She"," said",","," \"","I"," c","an","'","t","!","\"",<0x0A>
    EXPECT_EQ(tok_->encode("She said, \"I can't!\"\n"),
              (std::vector<int32_t>{338, 336, 432, 313, 442, 280, 303, 439, 413, 443, 436, 13}));
    EXPECT_EQ(tok_->encode("a"), (std::vector<int32_t>{261}));
    EXPECT_TRUE(tok_->encode("").empty());
}

TEST_F(Llama2cTokenizerTest, FastEncoderMatchesRunCLoop) {
    const std::string stories = read_file(kTinyStories);
    const std::string wiki = read_file(kWikiTest);
    // Several KB each; the wiki slice starts where it has accents and other non-ASCII text (byte fallback).
    const std::size_t accent = wiki.find("é");
    ASSERT_NE(accent, std::string::npos);
    const std::size_t wiki_start = wiki.rfind('\n', accent) + 1;
    const std::vector<std::string> texts = {
        head_lines(stories, 3000),
        head_lines(wiki.substr(wiki_start), 3000),
        "\xe2\x84\xa2\xe2\x80\x8a  \t\n\n",  // tokens that are multi-byte codepoints, and whitespace runs
        std::string("\x80\x80\x80\x80\x80\xff", 6) + "abc\xc3",  // invalid UTF-8: run.c's grouping of stray bytes
        std::string(300, 'a'),  // long runs of one pair exercise the leftmost-first tie rule
    };
    for (const std::string& text : texts) {
        std::vector<int32_t> expected = run_c_encode(*tok_, text);
        ASSERT_EQ(tok_->encode(text), expected) << "text starting with: " << text.substr(0, 60);
    }
}

TEST_F(Llama2cTokenizerTest, RoundTripsWholeFiles) {
    for (const auto& path : {kTinyStories, kWikiTest}) {
        const std::string text = read_file(path);
        std::vector<int32_t> ids;
        const double ms = test::time_ms([&] { ids = tok_->encode(text); });
        std::printf("[ timing ] llama2c tok512 encode of %s: %zu bytes -> %zu tokens in %.1f ms (%.2f MB/s)\n",
                    path.filename().c_str(), text.size(), ids.size(), ms, text.size() / 1e3 / ms);
        EXPECT_TRUE(tok_->decode(ids) == text) << path;
    }
}

TEST_F(Llama2cTokenizerTest, DecodePieceFollowsRunC) {
    const std::vector<int32_t> ids = tok_->encode("Once upon a time");
    // After BOS the dummy-prefix space is dropped (run.c decode()), elsewhere the piece is kept as is.
    EXPECT_EQ(tok_->decode_piece(1, ids[0]), "Once");
    EXPECT_EQ(tok_->decode_piece(ids[0], ids[1]), " upon");
    EXPECT_EQ(tok_->decode_piece(-1, ids[0]), "Once");  // the start of a stream is treated like after BOS
    EXPECT_EQ(tok_->decode_piece(5, ids[0]), " Once");
    EXPECT_EQ(tok_->decode_piece(5, 3 + 0xC3), "\xc3");  // <0xC3> is the raw byte
    EXPECT_EQ(tok_->decode_piece(5, 1), "");
    EXPECT_EQ(tok_->decode_piece(5, 2), "");
    std::string streamed;
    int32_t prev = tok_->bos_id();
    for (const int32_t id : ids) {
        streamed += tok_->decode_piece(prev, id);
        prev = id;
    }
    EXPECT_EQ(streamed, "Once upon a time");
    EXPECT_THROW(tok_->decode_piece(1, 512), Error);
}

TEST_F(Llama2cTokenizerTest, LoadTokenizerDetectsBinary) {
    const auto tok = load_tokenizer(kTok512);
    EXPECT_EQ(tok->kind(), "llama2c-bin");
    EXPECT_EQ(tok->vocab_size(), 512);
}

TEST(Llama2cTokenizerBadInput, TruncatedFile) {
    const std::string bytes = read_file(kTok512);
    test::TempDir dir;
    const auto cut_in_token = dir.write("cut.bin", bytes.substr(0, bytes.size() - 2));
    try {
        load_tokenizer(cut_in_token);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cut.bin"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("token 511"), std::string::npos) << e.what();
    }
    const auto cut_in_header = dir.write("header.bin", bytes.substr(0, bytes.size() - 8 - 3 + 4));
    EXPECT_THROW(load_tokenizer(cut_in_header), Error);
    const auto too_small = dir.write("tiny.bin", std::string("\x07\0", 2));
    EXPECT_THROW(load_tokenizer(too_small), Error);
}

TEST(Llama2cTokenizerBadInput, BytesAppendedAreNamedAsSuch) {
    // tokenizer.bin has no token count, so bytes after the last token read as the start of one more token: the
    // message must say the file may have bytes appended, not only that it is truncated.
    const std::string bytes = read_file(kTok512);
    test::TempDir dir;
    const auto appended = dir.write("appended.bin", bytes + "junk");
    try {
        load_tokenizer(appended);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("appended.bin"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("bytes appended after the last token"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("token 512"), std::string::npos) << e.what();
    }
}

TEST(Llama2cTokenizerBadInput, NotATokenizer) {
    test::TempDir dir;
    // A plausible header followed by tokens that are not the byte-fallback pieces llama2.c expects at 3..258.
    std::string bytes("\x04\0\0\0", 4);
    for (int i = 0; i < 300; ++i) {
        const float score = 0.0f;
        const int32_t len = 1;
        bytes.append(reinterpret_cast<const char*>(&score), 4);
        bytes.append(reinterpret_cast<const char*>(&len), 4);
        bytes.push_back('x');
    }
    try {
        load_tokenizer(dir.write("weird.bin", bytes));
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("weird.bin"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("<0x00>"), std::string::npos) << e.what();
    }
}

TEST(TokenizerLoader, MissingFileNamesPath) {
    try {
        load_tokenizer("/nonexistent/dir/tokenizer.bin");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/tokenizer.bin"), std::string::npos) << e.what();
    }
}

TEST(TokenizerLoader, FindsTokenizerNextToModel) {
    EXPECT_EQ(find_tokenizer_for_model(test::shared_path("models/stories260K/stories260K.bin")),
              test::shared_path("models/stories260K/tok512.bin"));
    EXPECT_EQ(find_tokenizer_for_model(test::shared_path("models/stories260K-hf")),
              test::shared_path("models/stories260K-hf/tok512.bin"));
    EXPECT_EQ(find_tokenizer_for_model(test::shared_path("models/smollm2-135m-tokenizer")),
              test::shared_path("models/smollm2-135m-tokenizer/tokenizer.json"));
    test::TempDir dir;
    dir.write("model.bin", "x");
    EXPECT_TRUE(find_tokenizer_for_model(dir.path() / "model.bin").empty());
    dir.write("tok32.bin", "x");
    dir.write("tokenizer.bin", "x");
    EXPECT_EQ(find_tokenizer_for_model(dir.path()), dir.path() / "tokenizer.bin");
    dir.write("tokenizer.json", "{}");
    EXPECT_EQ(find_tokenizer_for_model(dir.path() / "model.bin"), dir.path() / "tokenizer.json");
}

}  // namespace
}  // namespace kascade
