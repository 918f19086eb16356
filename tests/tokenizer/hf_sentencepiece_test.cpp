// tests/tokenizer/hf_sentencepiece_test.cpp: SentencePiece-style BPE tokenizer.json (Llama 2 / Mistral layout) on
// a small hand-made vocabulary whose ids are worked out by hand.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;

using test::kSpace;

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

TEST(SentencePieceBpe, NormalizedAddedTokensAreFoundAsTheNormalizerWritesThem) {
    // As in Llama 2's file: <s> is "normalized", so it is looked for as "▁<s>" in the normalized text.
    json config = llama2_style(true);
    config["added_tokens"][1]["normalized"] = true;
    test::TempDir dir;
    const auto tok = load_json(dir, config);
    EXPECT_EQ(tok->encode("<s>ab"), (std::vector<int32_t>{1, 264}));   // "▁<s>" | "ab" -> a+b
    EXPECT_EQ(tok->encode("ab <s>"), (std::vector<int32_t>{265, 1}));  // "▁ab" | "▁<s>"
    // Glued to a word it is text: "▁ab<s>" -> ▁ab, then < s > by byte fallback (3 + byte).
    EXPECT_EQ(tok->encode("ab<s>"), (std::vector<int32_t>{265, 3 + '<', 3 + 's', 3 + '>'}));
    // </s> is not normalized: found in the raw text wherever it is.
    EXPECT_EQ(tok->encode("ab</s>"), (std::vector<int32_t>{265, 2}));
}

/// Vocabulary a=0 " "=1 "  "=2 "a "=3 "a   "=4 with merges written as strings whose tokens hold spaces, and no
/// normalizer or pre-tokenizer, so that spaces reach BPE as they are.
json tokens_with_spaces(const json& merges) {
    return {
        {"decoder", {{"type", "ByteFallback"}}},
        {"model",
         {{"type", "BPE"}, {"vocab", {{"a", 0}, {" ", 1}, {"  ", 2}, {"a ", 3}, {"a   ", 4}}}, {"merges", merges}}}};
}

TEST(SentencePieceBpe, MergesOfTokensThatContainSpaces) {
    // "a  " can only be "a" + " " (the other split leaves an empty side), "   " only " " + " ", and "a    " only
    // "a " + "  " (neither "   " nor "a  " is a token).
    test::TempDir dir;
    const auto tok = load_json(dir, tokens_with_spaces({"a  ", "   ", "a    "}));
    // "a" + 3 spaces: a+" " (rank 0), then " "+" " (rank 1), then "a "+"  " (rank 2) -> "a   ".
    EXPECT_EQ(tok->encode("a   "), (std::vector<int32_t>{4}));
    EXPECT_EQ(tok->encode("  a"), (std::vector<int32_t>{2, 0}));
}

TEST(SentencePieceBpe, AmbiguousMergeWithSpacesIsRefused) {
    // "a a a" could be "a" + "a a" or "a a" + "a"; with both results in the vocabulary nothing tells which.
    json config = tokens_with_spaces({"a a a"});
    config["model"]["vocab"] = {{"a", 0}, {"a a", 1}, {"aa a", 2}, {"a aa", 3}};
    test::TempDir dir;
    try {
        load_json(dir, config);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("model.merges[0] = 'a a a' has several spaces and 2 ways"), std::string::npos)
            << message;
    }
}

}  // namespace
}  // namespace kascade
