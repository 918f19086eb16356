// io/tokenizer/sentencepiece_proto.cpp: a protobuf wire-format walk of a SentencePiece ModelProto.
#include "io/tokenizer/sentencepiece_proto.h"

#include <cstdint>
#include <functional>
#include <utility>

#include "base/error.h"

namespace kascade {

namespace {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
    uint32_t number = 0;
    int wire_type = 0;
    uint64_t varint = 0;     ///< the value of a varint field
    std::string_view bytes;  ///< the payload of a length-delimited field
    std::size_t offset = 0;  ///< of the field's tag, from the start of the file
};

/// The fields of one message, in order; `base` is the message's offset in the file, `where` its name in messages.
class MessageReader {
  public:
    /// `field_name` names a field by its number in messages (default "field N").
    MessageReader(std::string_view message, std::size_t base, std::string_view file, std::string where,
                  std::function<std::string(uint32_t)> field_name = {})
        : message_(message), base_(base), file_(file), where_(std::move(where)), field_name_(std::move(field_name)) {}

    /// The next field, or false at the end of the message. Throws if the bytes are not a protobuf message.
    bool next(Field& field) {
        if (pos_ >= message_.size()) return false;
        field = Field{};
        field.offset = base_ + pos_;
        const uint64_t tag = varint("a field tag");
        field.number = static_cast<uint32_t>(tag >> 3);
        field.wire_type = static_cast<int>(tag & 7);
        KASCADE_CHECK(tag >> 3 != 0 && tag >> 3 <= 0x1FFFFFFF,
                      "{}: not a SentencePiece model: {} has a field tag with number {} at byte {} (protobuf field "
                      "numbers are 1 .. 2^29 - 1)",
                      file_, where_, tag >> 3, field.offset);
        switch (field.wire_type) {
            case kVarint:
                field.varint = varint("a varint value");
                return true;
            case kFixed64:
                skip(8, field);
                return true;
            case kFixed32:
                skip(4, field);
                return true;
            case kLengthDelimited: {
                const uint64_t length = varint("a length");
                skip(length, field);
                field.bytes = message_.substr(pos_ - length, length);
                return true;
            }
            default:
                KASCADE_FAIL(
                    "{}: not a SentencePiece model: {} has field {} at byte {} with protobuf wire type {} (a "
                    "ModelProto only has types 0, 1, 2 and 5)",
                    file_, where_, field.number, field.offset, field.wire_type);
        }
    }

    /// Checks that `field` (named `name` in messages) has `wire_type`.
    void expect_type(const Field& field, int wire_type, std::string_view name) const {
        KASCADE_CHECK(field.wire_type == wire_type,
                      "{}: not a SentencePiece model: {} at byte {} has protobuf wire type {}, expected {}", file_,
                      base_ == 0 ? std::string(name) : where_ + "." + std::string(name), field.offset, field.wire_type,
                      wire_type);
    }

    std::size_t payload_offset(const Field& field) const {
        return base_ + static_cast<std::size_t>(field.bytes.data() - message_.data());
    }

  private:
    uint64_t varint(std::string_view what) {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            KASCADE_CHECK(pos_ < message_.size(),
                          "{}: not a complete SentencePiece model: {} ends inside {} at byte {} (the file is "
                          "truncated?)",
                          file_, where_, what, base_ + pos_);
            const auto byte = static_cast<unsigned char>(message_[pos_++]);
            value |= static_cast<uint64_t>(byte & 0x7F) << shift;
            if ((byte & 0x80) == 0) return value;
        }
        KASCADE_FAIL("{}: not a SentencePiece model: {} has a varint of more than 10 bytes at byte {}", file_, where_,
                     base_ + pos_);
    }

    void skip(uint64_t length, const Field& field) {
        const std::size_t left = message_.size() - pos_;
        KASCADE_CHECK(length <= left,
                      "{}: not a complete SentencePiece model: {} at byte {} declares {} bytes of content, but only {} "
                      "remain in {} (the file is truncated?)",
                      file_, field_name_ ? field_name_(field.number) : fmt::format("field {}", field.number),
                      field.offset, length, left, base_ == 0 ? "the file" : where_);
        pos_ += static_cast<std::size_t>(length);
    }

    std::string_view message_;
    std::size_t base_;
    std::string_view file_;
    std::string where_;
    std::function<std::string(uint32_t)> field_name_;
    std::size_t pos_ = 0;
};

}  // namespace

bool looks_like_sentencepiece_model(std::string_view bytes) {
    return !bytes.empty() && bytes[0] == '\x0A' && (bytes.size() < 3 || bytes[2] != '\0');
}

SentencePieceModelInfo read_sentencepiece_model_info(std::string_view bytes, std::string_view name) {
    SentencePieceModelInfo info;
    bool has_trainer_spec = false;
    bool has_normalizer_spec = false;
    auto field_name = [&info](uint32_t number) -> std::string {
        switch (number) {
            case 1:
                return fmt::format("pieces[{}]", info.n_pieces);
            case 2:
                return "trainer_spec";
            case 3:
                return "normalizer_spec";
            case 4:
                return "self_test_data";
            case 5:
                return "denormalizer_spec";
            default:
                return fmt::format("field {}", number);
        }
    };
    MessageReader model(bytes, 0, name, "the ModelProto", field_name);
    Field field;
    while (model.next(field)) {
        switch (field.number) {
            case 1: {
                const std::string where = fmt::format("pieces[{}]", info.n_pieces);
                model.expect_type(field, kLengthDelimited, where);
                MessageReader piece(field.bytes, model.payload_offset(field), name, where);
                bool has_text = false;
                for (Field f; piece.next(f);) {
                    if (f.number == 1) {
                        piece.expect_type(f, kLengthDelimited, "piece");
                        has_text = !f.bytes.empty();
                    }
                }
                KASCADE_CHECK(has_text, "{}: not a SentencePiece model: {} at byte {} has no piece text", name, where,
                              field.offset);
                ++info.n_pieces;
                break;
            }
            case 2: {
                model.expect_type(field, kLengthDelimited, "trainer_spec");
                has_trainer_spec = true;
                MessageReader spec(field.bytes, model.payload_offset(field), name, "trainer_spec");
                for (Field f; spec.next(f);) {
                    if (f.number == 44) {
                        spec.expect_type(f, kLengthDelimited, "unk_surface");
                        info.unk_surface = std::string(f.bytes);
                    }
                }
                break;
            }
            case 3: {
                model.expect_type(field, kLengthDelimited, "normalizer_spec");
                has_normalizer_spec = true;
                MessageReader spec(field.bytes, model.payload_offset(field), name, "normalizer_spec");
                for (Field f; spec.next(f);) {
                    if (f.number == 3) {
                        spec.expect_type(f, kVarint, "add_dummy_prefix");
                        info.add_dummy_prefix = f.varint != 0;
                    } else if (f.number == 4) {
                        spec.expect_type(f, kVarint, "remove_extra_whitespaces");
                        info.remove_extra_whitespaces = f.varint != 0;
                    }
                }
                break;
            }
            case 5: {
                model.expect_type(field, kLengthDelimited, "denormalizer_spec");
                MessageReader spec(field.bytes, model.payload_offset(field), name, "denormalizer_spec");
                for (Field f; spec.next(f);) {
                    if (f.number == 2 && f.wire_type == kLengthDelimited && !f.bytes.empty()) {
                        info.has_denormalizer_rules = true;
                    }
                }
                break;
            }
            default:  // self_test_data and extensions: not needed, their bounds were checked by next()
                break;
        }
    }
    KASCADE_CHECK(info.n_pieces > 0, "{}: not a SentencePiece model: it has no pieces", name);
    // Protobuf writes fields in number order, so a file cut between two pieces still parses, but lacks these.
    KASCADE_CHECK(has_trainer_spec && has_normalizer_spec,
                  "{}: not a complete SentencePiece model: no {} after its {} pieces (the file is truncated?)", name,
                  has_trainer_spec ? "normalizer_spec" : "trainer_spec", info.n_pieces);
    return info;
}

}  // namespace kascade
