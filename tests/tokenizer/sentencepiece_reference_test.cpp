// tests/tokenizer/sentencepiece_reference_test.cpp: SentencePiece tokenizer.model ids and decoded text against an
// independent reference, Google's Python binding (Debian's python3-sentencepiece), on models that the same binding
// trains at test time on TinyStories: one with Llama 2's trainer settings (BPE, byte fallback) and one Unigram
// model with SentencePiece's default NFKC normalization and no byte fallback (unseen characters become <unk>).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

const std::filesystem::path kScript =
    std::filesystem::path(KASCADE_SOURCE_DIR) / "tests" / "tokenizer" / "sentencepiece_reference.py";
// Debian's python3-sentencepiece installs into Debian's interpreter, which a python3 earlier on PATH (pyenv, a
// virtual environment) may not see.
constexpr const char* kPython = "/usr/bin/python3";

std::string python_missing() {
    const std::string probe = std::string(kPython) + " -c 'import sentencepiece' > /dev/null 2>&1";
    if (std::system(probe.c_str()) != 0) {
        return std::string(kPython) + " cannot import sentencepiece (install Debian's python3-sentencepiece)";
    }
    return {};
}

bool run(const std::string& command) {
    const int status = std::system(command.c_str());
    EXPECT_EQ(status, 0) << command;
    return status == 0;
}

std::string quote(const std::filesystem::path& path) {
    // Appended rather than "'" + path.string(): GCC 12 warns falsely (-Wstringop-overflow) about the latter.
    std::string quoted(1, '\'');
    quoted += path.string();
    quoted += '\'';
    return quoted;
}

struct Reference {
    std::vector<int32_t> ids;
    std::string decoded;
};

/// sp.encode(text) and sp.decode() of those ids, by the Python binding.
Reference python_encode(const std::filesystem::path& model, const std::string& text, const test::TempDir& dir) {
    const auto text_file = dir.write("text.txt", text);
    const auto out = dir.path() / "reference.json";
    if (!run(std::string(kPython) + " " + quote(kScript) + " encode " + quote(model) + " " + quote(text_file) + " " +
             quote(out))) {
        return {};
    }
    const nlohmann::json json = nlohmann::json::parse(read_file(out));
    return {json["ids"].get<std::vector<int32_t>>(), json["decoded"].get<std::string>()};
}

// Everything that reaches a tokenizer's corners: runs of spaces, tabs and newlines ("\r\n" too), leading and
// trailing spaces, digits (Llama 2 splits them), accents, combining marks, CJK, emoji (byte fallback), and the
// text of control tokens.
const std::string kEdgeText =
    "  Once upon a time,   there was\ta cat.\n\n\r\n  It's 2024-01-15: 3.14159 and 1234567!  "
    "Grüße naïve café e\xcc\x81 日本語のテキスト Привет \xf0\x9f\x98\x80\xf0\x9f\x91\x8d <s>hi</s> <unk> \xe2\x96\x81 "
    "x  ";

class SentencePieceReferenceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string missing = python_missing();
        if (!missing.empty()) {
            if (test::references_required()) FAIL() << "KASCADE_REQUIRE_NODE_REFERENCE=1 but " << missing;
            GTEST_SKIP() << "the SentencePiece reference is unavailable: " << missing;
        }
    }

    /// A model of `kind` ("llama2" or "unigram") trained by the Python binding on TinyStories.
    std::filesystem::path train(const std::string& kind) const {
        const auto model = dir_.path() / (kind + ".model");
        run(std::string(kPython) + " " + quote(kScript) + " train " + quote(test::kTinyStories) + " " + quote(model) +
            " " + kind);
        return model;
    }

    /// Our ids and decoded text against the reference's on `text`.
    void expect_same(const Tokenizer& tok, const std::filesystem::path& model, const std::string& text,
                     const std::string& what) const {
        const std::vector<int32_t> ids = tok.encode(text);
        const Reference reference = python_encode(model, text, dir_);
        test::expect_same_ids(ids, reference.ids, tok, what);
        EXPECT_EQ(tok.decode(ids), reference.decoded) << what;
    }

    test::TempDir dir_{"sentencepiece"};
};

TEST_F(SentencePieceReferenceTest, Llama2StyleBpeMatches) {
    const auto model = train("llama2");
    const auto tok = load_tokenizer(model);
    EXPECT_EQ(tok->kind(), "sentencepiece-model");
    EXPECT_EQ(tok->vocab_size(), 1000);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    // The training text itself, and two texts it has never seen (192 KiB of each).
    for (const auto& path : {test::kTinyStories, test::kWikiTest, test::kMobyDick}) {
        const std::string text = test::head_lines(read_file(path), 192 * 1024);
        expect_same(*tok, model, text, path.filename().string());
        EXPECT_EQ(tok->decode(tok->encode(text)), text) << path;  // byte fallback: nothing is lost
    }
    expect_same(*tok, model, kEdgeText, "edge cases");
    // A "▁" written in the text is SentencePiece's escaped space, so it comes back as a space (as from sp.decode).
    const std::size_t metaspace = kEdgeText.find("\xe2\x96\x81");
    std::string expected = kEdgeText.substr(0, metaspace);
    expected += ' ';
    expected += kEdgeText.substr(metaspace + 3);
    EXPECT_EQ(tok->decode(tok->encode(kEdgeText)), expected);
}

TEST_F(SentencePieceReferenceTest, UnigramWithNormalizationMatches) {
    const auto model = train("unigram");
    const auto tok = load_tokenizer(model);
    EXPECT_EQ(tok->kind(), "sentencepiece-model");
    for (const auto& path : {test::kWikiTest, test::kMobyDick}) {
        expect_same(*tok, model, test::head_lines(read_file(path), 64 * 1024), path.filename().string());
    }
    // NFKC, whitespace runs squeezed, <unk> for what TinyStories never had: decode is not the text any more, but it
    // is what the library's decoder writes.
    expect_same(*tok, model, kEdgeText, "edge cases");
}

TEST_F(SentencePieceReferenceTest, TruncatedTrainedModelIsRefused) {
    const std::string bytes = read_file(train("llama2"));
    for (const std::size_t cut : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
        const auto path = dir_.write("cut.model", bytes.substr(0, cut));
        try {
            load_tokenizer(path);
            ADD_FAILURE() << "a model cut at byte " << cut << " of " << bytes.size() << " was accepted";
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(path.string() + ": not a complete SentencePiece model"), std::string::npos)
                << message;
        }
    }
}

}  // namespace
}  // namespace kascade
