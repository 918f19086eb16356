// tests/tokenizer/hf_sentencepiece_test.cpp: SentencePiece-style BPE tokenizer.json (Llama 2 / Mistral layout) on
// a small hand-made vocabulary whose ids are worked out by hand.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/error.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;

constexpr const char* kSpace = "\xe2\x96\x81";  // ▁

/// <unk> <s> </s>, the 256 byte pieces <0x00>..<0xFF> (ids 3..258) and then, from 259:
/// ▁ a b c ▁a ab ▁ab bc h i hi ▁hi, with merges (rank order) ▁+a, a+b, ▁a+b, b+c, h+i, ▁+hi.
json llama2_style(bool byte_fallback) {
    json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
    for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
    const std::vector<std::string> pieces = {std::string(kSpace),
                                             "a",
                                             "b",
                                             "c",
                                             std::string(kSpace) + "a",
                                             "ab",
                                             std::string(kSpace) + "ab",
                                             "bc",
                                             "h",
                                             "i",
                                             "hi",
                                             std::string(kSpace) + "hi"};
    for (std::size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
    const std::string sp(kSpace);
    auto special = [](int id, const char* content) {
        return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                    {"rstrip", false}, {"normalized", false}, {"special", true}};
    };
    return {
        {"version", "1.0"},
        {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
        {"normalizer",
         {{"type", "Sequence"},
          {"normalizers",
           {{{"type", "Prepend"}, {"prepend", sp}},
            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
        {"pre_tokenizer", nullptr},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model",
         {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", "<unk>"},
          {"fuse_unk", true},
          {"byte_fallback", byte_fallback},
          {"vocab", vocab},
          // Both merge formats: the older "left right" strings and ["left", "right"] pairs.
          {"merges",
           {sp + " a", json::array({"a", "b"}), json::array({sp + "a", "b"}), "b c", "h i", json::array({sp, "hi"})}}}},
    };
}

std::unique_ptr<Tokenizer> load_json(const test::TempDir& dir, const json& config) {
    return load_tokenizer(dir.write("tokenizer.json", config.dump(2)));
}

TEST(SentencePieceBpe, EncodesHandWorkedIds) {
    test::TempDir dir;
    const auto tok = load_json(dir, llama2_style(true));
    EXPECT_EQ(tok->kind(), "hf-bpe-sentencepiece");
    EXPECT_EQ(tok->vocab_size(), 271);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    // "▁abc": ▁+a (rank 0) first, then ▁a+b (rank 2) before b+c (rank 3) -> ▁ab c
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{265, 262}));
    // "▁ab▁c" -> ▁ab ▁ c
    EXPECT_EQ(tok->encode("ab c"), (std::vector<int32_t>{265, 259, 262}));
    // "▁hi▁é": h+i, then ▁+hi; é is not a piece -> its UTF-8 bytes 0xC3 0xA9 as <0xC3> <0xA9> (3 + byte)
    EXPECT_EQ(tok->encode("hi é"), (std::vector<int32_t>{270, 259, 3 + 0xC3, 3 + 0xA9}));
    // Added tokens are cut out first; Prepend applies to the text after them as well (Hugging Face's behaviour).
    EXPECT_EQ(tok->encode("<s>ab</s>"), (std::vector<int32_t>{1, 265, 2}));
    EXPECT_TRUE(tok->encode("").empty());
}

TEST(SentencePieceBpe, DecodesLikeTheLlamaDecoder) {
    test::TempDir dir;
    const auto tok = load_json(dir, llama2_style(true));
    for (const std::string text : {"abc", "ab c", "hi é", "  leading and trailing  ", "日本 ab"}) {
        EXPECT_EQ(tok->decode(tok->encode(text)), text);
    }
    const std::vector<int32_t> ids = {270, 259, 3 + 0xC3, 3 + 0xA9};
    EXPECT_EQ(tok->decode(ids), "hi é");
    // Streaming: the first piece (or the first after BOS) loses its leading space, byte pieces are raw bytes.
    EXPECT_EQ(tok->decode_piece(-1, 270), "hi");
    EXPECT_EQ(tok->decode_piece(1, 270), "hi");
    EXPECT_EQ(tok->decode_piece(262, 270), " hi");
    EXPECT_EQ(tok->decode_piece(259, 3 + 0xC3), "\xc3");
}

TEST(SentencePieceBpe, UnknownCharactersFuseIntoOneUnk) {
    test::TempDir dir;
    const auto tok = load_json(dir, llama2_style(false));
    // "▁a€€b": € has no piece and no byte fallback -> one <unk> for the run (fuse_unk); ▁+a merges.
    EXPECT_EQ(tok->encode("a€€b"), (std::vector<int32_t>{263, 0, 261}));
}

TEST(SentencePieceBpe, MetaspacePreTokenizer) {
    // The newer Llama / Mistral conversion: no normalizer, a Metaspace pre-tokenizer that splits on ▁.
    json config = llama2_style(true);
    config["normalizer"] = nullptr;
    config["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", true}};
    config["decoder"] = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", true}};
    test::TempDir dir;
    const auto tok = load_json(dir, config);
    EXPECT_EQ(tok->kind(), "hf-bpe-sentencepiece");
    EXPECT_EQ(tok->encode("ab c"), (std::vector<int32_t>{265, 259, 262}));  // words ▁ab | ▁c
    // prepend_scheme "first": no ▁ before text that follows an added token.
    EXPECT_EQ(tok->encode("<s>ab"), (std::vector<int32_t>{1, 264}));
    EXPECT_EQ(tok->decode(tok->encode("ab c hi")), "ab c hi");
}

}  // namespace
}  // namespace kascade
