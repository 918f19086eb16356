// io/tokenizer/sentencepiece_pieces.h: how SentencePiece writes text into its pieces, shared by every reader of
// SentencePiece vocabularies (a tokenizer.json of the Llama 2 family, a tokenizer.model).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kascade {

/// U+2581 "▁": SentencePiece's visible space.
inline constexpr std::string_view kMetaspace = "\xe2\x96\x81";

/// The byte of a byte-fallback piece ("<0xAB>" -> 0xAB, upper-case hex as SentencePiece writes it), or -1 if
/// `piece` is not one.
int byte_fallback_value(std::string_view piece);

/// `text` with every " " written as kMetaspace (how SentencePiece stores a space in a piece), and back.
std::string spaces_to_metaspace(std::string_view text);
std::string metaspace_to_spaces(std::string_view text);

/// Bytes of the UTF-8 sequence that starts with `lead` (1 for a continuation or invalid byte): SentencePiece-style
/// merges start from single characters.
std::size_t utf8_sequence_length(unsigned char lead);

}  // namespace kascade
