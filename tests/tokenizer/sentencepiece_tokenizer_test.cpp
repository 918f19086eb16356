// tests/tokenizer/sentencepiece_tokenizer_test.cpp: SentencePiece tokenizer.model files on a model written here
// byte by byte (protobuf by hand, so this runs without Python): loading by content, decoding rules, and truncated or
// broken files refused naming the file and the field. Ids on real text are checked against Python's sentencepiece
// in sentencepiece_reference_test.cpp.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

// Protobuf wire format, written out by hand (https://protobuf.dev/programming-guides/encoding/).
std::string varint(uint64_t value) {
    std::string out;
    do {
        const auto low = static_cast<unsigned char>(value & 0x7F);
        value >>= 7;
        out += static_cast<char>(value ? low | 0x80 : low);
    } while (value);
    return out;
}
std::string bytes_field(int number, std::string_view payload) {
    return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(payload.size()) + std::string(payload);
}
std::string varint_field(int number, uint64_t value) {
    return varint(static_cast<uint64_t>(number) << 3) + varint(value);
}
std::string float_field(int number, float value) {
    std::string out = varint(static_cast<uint64_t>(number) << 3 | 5);
    char raw[4];
    std::memcpy(raw, &value, 4);
    return out + std::string(raw, 4);
}

enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };

std::string piece(std::string_view text, float score, PieceType type) {
    return bytes_field(1, bytes_field(1, text) + float_field(2, score) + varint_field(3, type));
}

using test::kSpace;

struct ModelParts {
    std::string pieces;
    std::string trainer_spec;
    std::string normalizer_spec;
    std::string whole() const { return pieces + trainer_spec + normalizer_spec; }
};

/// A BPE model as the trainer writes one (Llama 2's layout): <unk>, <s>, </s>, the 256 byte pieces, then pieces
/// with decreasing scores (the earlier, the sooner merged); identity normalization with a dummy prefix.
ModelParts tiny_bpe_model(bool add_dummy_prefix = true) {
    ModelParts m;
    m.pieces = piece("<unk>", 0, kUnknown) + piece("<s>", 0, kControl) + piece("</s>", 0, kControl);
    for (int b = 0; b < 256; ++b) m.pieces += piece(fmt::format("<0x{:02X}>", b), 0, kByte);
    const std::vector<std::string> merged = {kSpace + "a", kSpace + "b", "ab", kSpace + "ab", "a", "b", kSpace};
    float score = 0;
    for (const std::string& p : merged) m.pieces += piece(p, score--, kNormal);
    // model_type BPE (2), vocab_size, byte_fallback (35).
    m.trainer_spec = bytes_field(2, varint_field(3, 2) + varint_field(4, 266) + varint_field(35, 1));
    // name, add_dummy_prefix (3), remove_extra_whitespaces (4), escape_whitespaces (5).
    m.normalizer_spec = bytes_field(
        3, bytes_field(1, "identity") + varint_field(3, add_dummy_prefix) + varint_field(4, 0) + varint_field(5, 1));
    return m;
}

// Ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then 259 ▁a, 260 ▁b, 261 ab, 262 ▁ab, 263 a, 264 b, 265 ▁.
constexpr int32_t kSpaceA = 259, kSpaceB = 260, kAB = 261, kSpaceAB = 262, kA = 263, kB = 264, kSpaceOnly = 265;
int32_t byte_id(unsigned char b) {
    return 3 + b;
}

/// Loads `bytes` as tokenizer.model and returns the one-line error naming the file.
std::string sentencepiece_load_error(std::string_view bytes) {
    test::TempDir dir;
    try {
        load_tokenizer(dir.write("tokenizer.model", bytes));
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        return message;
    }
    ADD_FAILURE() << "expected an error";
    return {};
}

TEST(SentencePieceTokenizer, LoadsByContent) {
    test::TempDir dir;
    const auto tok = load_tokenizer(dir.write("spiece.bin", tiny_bpe_model().whole()));
    EXPECT_EQ(tok->kind(), "sentencepiece-model");
    EXPECT_EQ(tok->vocab_size(), 266);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    EXPECT_EQ(tok->adds_bos_token(), std::nullopt);
    // The library adds the dummy prefix "▁", merges by score, and falls back to bytes for what has no piece.
    EXPECT_EQ(tok->encode("ab b"), (std::vector<int32_t>{kSpaceAB, kSpaceB}));
    EXPECT_EQ(tok->encode("ba"), (std::vector<int32_t>{kSpaceB, kA}));
    EXPECT_EQ(tok->encode("a\xc3\xa9"), (std::vector<int32_t>{kSpaceA, byte_id(0xC3), byte_id(0xA9)}));
    // Control tokens written in the text are text, as in sp.encode(): "<s>" is bytes, not id 1.
    const std::vector<int32_t> control = tok->encode("<s>");
    EXPECT_EQ(control, (std::vector<int32_t>{kSpaceOnly, byte_id('<'), byte_id('s'), byte_id('>')}));
    EXPECT_TRUE(tok->encode("").empty());
}

TEST(SentencePieceTokenizer, DecodesAsTheLibraryDoes) {
    test::TempDir dir;
    const auto tok = load_tokenizer(dir.write("tokenizer.model", tiny_bpe_model().whole()));
    // The dummy prefix's space goes at the start of a stream and after BOS, not elsewhere.
    EXPECT_EQ(tok->decode_piece(-1, kSpaceAB), "ab");
    EXPECT_EQ(tok->decode_piece(1, kSpaceAB), "ab");
    EXPECT_EQ(tok->decode_piece(kA, kSpaceAB), " ab");
    // BOS and EOS give no text; <unk> the model's unk_surface; a byte piece its byte, never losing a space.
    EXPECT_EQ(tok->decode_piece(-1, 1), "");
    EXPECT_EQ(tok->decode_piece(kA, 2), "");
    EXPECT_EQ(tok->decode_piece(kA, 0), " \xE2\x81\x87 ");
    EXPECT_EQ(tok->decode_piece(-1, byte_id(' ')), " ");
    EXPECT_EQ(tok->decode_piece(kA, byte_id(0xFF)), "\xFF");
    const std::string text = "ab ba  a\xc3\xa9 \t\n";
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
    EXPECT_THROW(tok->decode_piece(-1, 266), Error);

    // Without a dummy prefix nothing is dropped.
    const auto no_prefix = load_tokenizer(dir.write("no-prefix.model", tiny_bpe_model(false).whole()));
    EXPECT_EQ(no_prefix->encode(" ab"), (std::vector<int32_t>{kSpaceAB}));
    EXPECT_EQ(no_prefix->decode_piece(-1, kSpaceAB), " ab");
}

TEST(SentencePieceTokenizer, TokenizerConfigBesideIt) {
    test::TempDir dir;
    const auto path = dir.write("tokenizer.model", tiny_bpe_model().whole());
    dir.write("tokenizer_config.json", R"({"add_bos_token": true, "add_eos_token": false})");
    const auto tok = load_tokenizer(path);
    EXPECT_EQ(tok->adds_bos_token(), std::optional<bool>(true));
    EXPECT_EQ(tok->adds_eos_token(), std::optional<bool>(false));
    EXPECT_EQ(find_tokenizer_for_model(dir.path()), path);
}

TEST(SentencePieceTokenizerBadInput, TruncatedFiles) {
    const ModelParts m = tiny_bpe_model();
    const std::string whole = m.whole();
    // Cut 3 bytes into the content of piece 100 (<0x61>; a tag byte and a length byte come first).
    const std::string piece_bytes = piece("<0x61>", 0, kByte);
    const std::size_t piece_100 = m.pieces.find(piece_bytes);
    ASSERT_NE(piece_100, std::string::npos);
    const std::string in_piece = sentencepiece_load_error(whole.substr(0, piece_100 + 5));
    EXPECT_NE(in_piece.find("not a complete SentencePiece model: pieces[100] at byte " + std::to_string(piece_100) +
                            " declares " + std::to_string(piece_bytes.size() - 2) +
                            " bytes of content, but only 3 remain in the file (the file is truncated?)"),
              std::string::npos)
        << in_piece;
    // Between two pieces: every piece is whole, but the specs written after them are missing.
    const std::string between = sentencepiece_load_error(whole.substr(0, piece_100));
    EXPECT_NE(between.find("no trainer_spec after its 100 pieces (the file is truncated?)"), std::string::npos)
        << between;
    const std::string before_normalizer = sentencepiece_load_error(m.pieces + m.trainer_spec);
    EXPECT_NE(before_normalizer.find("no normalizer_spec after its 266 pieces"), std::string::npos)
        << before_normalizer;
    const std::string in_spec = sentencepiece_load_error(whole.substr(0, m.pieces.size() + m.trainer_spec.size() + 4));
    EXPECT_NE(in_spec.find("normalizer_spec at byte " + std::to_string(m.pieces.size() + m.trainer_spec.size())),
              std::string::npos)
        << in_spec;
    // A cut inside a tag or length.
    const std::string in_length = sentencepiece_load_error(std::string("\x0A\x8E", 2));
    EXPECT_NE(in_length.find("ends inside a length at byte 2"), std::string::npos) << in_length;
}

TEST(SentencePieceTokenizerBadInput, BrokenMessages) {
    const ModelParts m = tiny_bpe_model();
    // A piece whose text is empty.
    const std::string empty =
        sentencepiece_load_error(bytes_field(1, float_field(2, 0)) + m.pieces + m.trainer_spec + m.normalizer_spec);
    EXPECT_NE(empty.find("pieces[0] at byte 0 has no piece text"), std::string::npos) << empty;
    // A group (wire type 3), which no ModelProto has.
    const std::string group =
        sentencepiece_load_error(m.pieces + varint(7 << 3 | 3) + m.trainer_spec + m.normalizer_spec);
    EXPECT_NE(group.find("has field 7 at byte " + std::to_string(m.pieces.size()) + " with protobuf wire type 3"),
              std::string::npos)
        << group;
    // A spec of the wrong wire type.
    const std::string wire = sentencepiece_load_error(m.pieces + varint_field(2, 1) + m.normalizer_spec);
    EXPECT_NE(wire.find("trainer_spec at byte " + std::to_string(m.pieces.size()) +
                        " has protobuf wire type 0, "
                        "expected 2"),
              std::string::npos)
        << wire;
    // Well-formed protobuf that the library refuses: no <unk> piece (every id normal).
    std::string no_unk = piece("<unk>", 0, kNormal) + m.pieces.substr(piece("<unk>", 0, kUnknown).size());
    const std::string refused = sentencepiece_load_error(no_unk + m.trainer_spec + m.normalizer_spec);
    EXPECT_NE(refused.find("libsentencepiece cannot load this SentencePiece model"), std::string::npos) << refused;
}

}  // namespace
}  // namespace kascade
