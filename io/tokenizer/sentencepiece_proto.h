// io/tokenizer/sentencepiece_proto.h: the protobuf wire format of a SentencePiece ModelProto (tokenizer.model), read
// by kascade itself for two things libsentencepiece does not give: where a broken file breaks (the library only says
// it cannot parse it), and the normalizer flags that decide how a decoded text starts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kascade {

/// The fields of a ModelProto that kascade reads itself (sentencepiece_model.proto field numbers in brackets).
struct SentencePieceModelInfo {
    std::size_t n_pieces = 0;                    ///< pieces [1]
    bool add_dummy_prefix = true;                ///< normalizer_spec [3] .add_dummy_prefix [3]; proto default true
    bool remove_extra_whitespaces = true;        ///< normalizer_spec [3] .remove_extra_whitespaces [4]; default true
    std::string unk_surface = " \xE2\x81\x87 ";  ///< trainer_spec [2] .unk_surface [44]: what <unk> decodes to
    bool has_denormalizer_rules = false;         ///< denormalizer_spec [5] with a precompiled_charsmap [2]
};

/// True if `bytes` start as a ModelProto does: protobuf writes fields by number, so the first is pieces (tag 0x0A),
/// then its length (a varint whose last byte is non-zero) and the piece's own first tag (non-zero). A llama2.c
/// tokenizer.bin starts with its max_token_length (< 65536, little-endian int32), so its bytes 2 and 3 are zero.
bool looks_like_sentencepiece_model(std::string_view bytes);

/// Walks the whole message (every field's tag and length, nested in pieces and the specs) and returns the fields
/// above. Throws kascade::Error naming `name`, the field and the byte offset where the bytes stop being a
/// ModelProto: a length that runs past the end (a truncated file), a malformed tag or varint, a missing
/// trainer_spec or normalizer_spec (protobuf writes them after the pieces, so a file cut between two pieces lacks
/// them), a piece without text.
SentencePieceModelInfo read_sentencepiece_model_info(std::string_view bytes, std::string_view name);

}  // namespace kascade
