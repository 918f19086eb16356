// tests/tokenizer/hf_normalizer_test.cpp: the normalizers of tokenizer.json against hand-written expected strings;
// the Unicode examples are those of UAX #15 (Unicode Normalization Forms) and the Unicode character tables.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/tokenizer/hf_normalizer.h"

namespace kascade {
namespace {

using nlohmann::json;

std::string normalize(const json& config, std::string_view text) {
    return HfNormalizer(config, "tokenizer.json").apply(text);
}

/// The text in the Unicode normal form `form` ("NFC", ...), through the tokenizer.json normalizer of that type.
std::string normal_form(std::string_view form, std::string_view text) {
    return normalize(json{{"type", form}}, text);
}

// UAX #15, the examples of its "Normalization Forms" figures.
constexpr const char* kDWithDots = "\xe1\xb8\x8b\xcc\xa3";      // U+1E0B (d with dot above) U+0323 (dot below)
constexpr const char* kLongSWithDots = "\xe1\xba\x9b\xcc\xa3";  // U+1E9B (long s with dot above) U+0323
constexpr const char* kAngstromSign = "\xe2\x84\xab";           // U+212B, canonically equivalent to U+00C5 Å

TEST(HfNormalizer, Nfc) {
    EXPECT_EQ(normal_form("NFC", "e\xcc\x81"), "\xc3\xa9");                     // e + U+0301 -> é U+00E9
    EXPECT_EQ(normal_form("NFC", kDWithDots), "\xe1\xb8\x8d\xcc\x87");          // marks reordered: U+1E0D U+0307
    EXPECT_EQ(normal_form("NFC", kLongSWithDots), kLongSWithDots);              // already composed
    EXPECT_EQ(normal_form("NFC", kAngstromSign), "\xc3\x85");                   // U+00C5
    EXPECT_EQ(normal_form("NFC", "\xe1\x84\x80\xe1\x85\xa1"), "\xea\xb0\x80");  // Hangul jamo U+1100 U+1161 -> 가
    EXPECT_EQ(normal_form("NFC", "\xef\xac\x81"), "\xef\xac\x81");              // ﬁ U+FB01 is not canonical: kept
}

TEST(HfNormalizer, Nfd) {
    EXPECT_EQ(normal_form("NFD", "\xc3\xa9"), "e\xcc\x81");
    EXPECT_EQ(normal_form("NFD", kDWithDots), "d\xcc\xa3\xcc\x87");             // d U+0323 U+0307
    EXPECT_EQ(normal_form("NFD", kLongSWithDots), "\xc5\xbf\xcc\xa3\xcc\x87");  // U+017F U+0323 U+0307
    EXPECT_EQ(normal_form("NFD", "\xea\xb0\x80"), "\xe1\x84\x80\xe1\x85\xa1");
    EXPECT_EQ(normal_form("NFD", "\xef\xac\x81"), "\xef\xac\x81");
}

TEST(HfNormalizer, Nfkc) {
    EXPECT_EQ(normal_form("NFKC", "\xef\xac\x81"), "fi");                           // ﬁ
    EXPECT_EQ(normal_form("NFKC", kLongSWithDots), "\xe1\xb9\xa9");                 // U+1E69
    EXPECT_EQ(normal_form("NFKC", "\xef\xbc\x91\xef\xbc\x92\xef\xbc\x93"), "123");  // full-width １２３
    EXPECT_EQ(normal_form("NFKC", "x\xc2\xb2"), "x2");                              // superscript two
    EXPECT_EQ(normal_form("NFKC", "\xe2\x91\xa0"), "1");                            // circled one
    EXPECT_EQ(normal_form("NFKC", "\xc2\xbd"),
              "1\xe2\x81\x84"
              "2");                                                  // ½ -> 1 U+2044 2
    EXPECT_EQ(normal_form("NFKC", "\xef\xbd\xb6"), "\xe3\x82\xab");  // half-width ｶ -> カ
    EXPECT_EQ(normal_form("NFKC", "e\xcc\x81"), "\xc3\xa9");
}

TEST(HfNormalizer, Nfkd) {
    EXPECT_EQ(normal_form("NFKD", "\xef\xac\x81"), "fi");
    EXPECT_EQ(normal_form("NFKD", kLongSWithDots), "s\xcc\xa3\xcc\x87");  // s U+0323 U+0307
    EXPECT_EQ(normal_form("NFKD", "\xc3\xa9"), "e\xcc\x81");
    EXPECT_EQ(normal_form("NFKD", "\xef\xbc\x91"), "1");
}

TEST(HfNormalizer, AsciiEmptyAndNulAreKept) {
    for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"}) {
        EXPECT_EQ(normal_form(form, "plain ASCII text\n"), "plain ASCII text\n") << form;
        EXPECT_EQ(normal_form(form, ""), "") << form;
        EXPECT_EQ(normal_form(form, std::string_view("a\0b", 3)), std::string("a\0b", 3)) << form;
    }
}

TEST(HfNormalizer, SequenceAppliesStepsInOrder) {
    const json config = {{"type", "Sequence"},
                         {"normalizers",
                          {{{"type", "NFKC"}},
                           {{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
                           {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}};
    EXPECT_EQ(normalize(config, "\xef\xac\x81ne day"),
              "\xe2\x96\x81"
              "fine"
              "\xe2\x96\x81"
              "day");
}

TEST(HfNormalizer, TextThatIsNotUtf8IsRefused) {
    try {
        normal_form("NFC", "ok \xff");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("tokenizer.json: the NFC normalizer cannot read the text"), std::string::npos)
            << message;
    }
}

TEST(HfNormalizer, UnknownTypeNamesTheFieldAndTheSupportedOnes) {
    try {
        normalize(json{{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}}, "x");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("normalizer.normalizers[0].type 'Lowercase' is not supported"), std::string::npos)
            << message;
        EXPECT_NE(message.find("(supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)"), std::string::npos)
            << message;
    }
}

}  // namespace
}  // namespace kascade
