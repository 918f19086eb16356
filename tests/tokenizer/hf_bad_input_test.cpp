// tests/tokenizer/hf_bad_input_test.cpp: broken or unsupported tokenizer.json files are refused with a one-line
// message that names the file and the field.
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

/// Loads `contents` as tokenizer.json and returns the error message (empty if it loaded).
std::string load_error(std::string_view contents) {
    test::TempDir dir;
    try {
        load_tokenizer(dir.write("tokenizer.json", contents));
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("tokenizer.json"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        return message;
    }
    return {};
}

constexpr std::string_view kByteLevelTail =
    R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "decoder": {"type": "ByteLevel"})";

TEST(HfTokenizerBadInput, NotJson) {
    const std::string message = load_error("{ \"model\": [1, 2");
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST(HfTokenizerBadInput, MissingModelOrVocab) {
    EXPECT_NE(load_error("{}").find("'model'"), std::string::npos);
    const std::string message = load_error(R"({"model": {"type": "BPE", "merges": []}})");
    EXPECT_NE(message.find("model.vocab"), std::string::npos) << message;
}

TEST(HfTokenizerBadInput, TokenIdsOutsideTheTable) {
    // Ids index the id -> text table: a negative id, or one far beyond any real vocabulary (2^22 = 4194304), is
    // refused before the table is sized by it.
    for (const std::string id : {"-1", "4194304", "536870911"}) {
        const std::string vocab = load_error(R"({"model": {"type": "BPE", "vocab": {"a": )" + id +
                                             R"(}, "merges": []}, )" + std::string(kByteLevelTail) + "}");
        EXPECT_NE(vocab.find("model.vocab['a'] = " + id + " is not a token id (expected an integer in [0, 4194304))"),
                  std::string::npos)
            << vocab;
        const std::string added =
            load_error(R"({"added_tokens": [{"id": )" + id +
                       R"(, "content": "<s>"}], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, )" +
                       std::string(kByteLevelTail) + "}");
        EXPECT_NE(added.find("added_tokens[0] must have an integer 'id' in [0, 4194304)"), std::string::npos) << added;
    }
    EXPECT_EQ(load_error(R"({"model": {"type": "BPE", "vocab": {"a": 4194303}, "merges": []}, )" +
                         std::string(kByteLevelTail) + "}"),
              "");
}

TEST(HfTokenizerBadInput, UnsupportedModelTypes) {
    for (const std::string type : {"WordPiece", "Unigram"}) {
        const std::string message = load_error(R"({"model": {"type": ")" + type + R"(", "vocab": {"a": 0}}})");
        EXPECT_NE(message.find("model.type"), std::string::npos) << message;
        EXPECT_NE(message.find(type), std::string::npos) << message;
    }
}

TEST(HfTokenizerBadInput, MergeNamesUnknownToken) {
    const std::string message = load_error(
        std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", "a x"]}, )") +
        std::string(kByteLevelTail) + "}");
    EXPECT_NE(message.find("model.merges[1]"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown token 'x'"), std::string::npos) << message;
    const std::string makes =
        load_error(std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]}, )") +
                   std::string(kByteLevelTail) + "}");
    EXPECT_NE(makes.find("makes the unknown token 'ab'"), std::string::npos) << makes;
    const std::string malformed =
        load_error(std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}, )") +
                   std::string(kByteLevelTail) + "}");
    EXPECT_NE(malformed.find("model.merges[0]"), std::string::npos) << malformed;
}

TEST(HfTokenizerBadInput, UnsupportedComponents) {
    const std::string normalizer = load_error(
        R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "BertNormalizer"}]},
            "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    EXPECT_NE(normalizer.find("normalizer.normalizers[1].type 'BertNormalizer' is not supported (supported: "
                              "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)"),
              std::string::npos)
        << normalizer;
    const std::string family = load_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    EXPECT_NE(family.find("cannot tell which BPE family"), std::string::npos) << family;
    const std::string regex = load_error(
        R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"},
            "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    EXPECT_NE(regex.find("cannot compile regex '(unclosed'"), std::string::npos) << regex;
}

TEST(HfTokenizerBadInput, FieldOfWrongType) {
    const std::string message = load_error(R"({"model": {"type": 5, "vocab": {"a": 0}}})");
    EXPECT_NE(message.find("unexpected tokenizer.json structure"), std::string::npos) << message;
}

TEST(HfTokenizerBadInput, TextWithoutAnyToken) {
    // A byte-level vocabulary missing most bytes, with no unk_token: such text is refused rather than dropped.
    test::TempDir dir;
    const auto tok = load_tokenizer(dir.write(
        "tokenizer.json", std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, )") +
                              std::string(kByteLevelTail) + "}"));
    EXPECT_EQ(tok->encode("ab"), (std::vector<int32_t>{0, 1}));
    try {
        tok->encode("abc");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no token for byte 0x63"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kascade
