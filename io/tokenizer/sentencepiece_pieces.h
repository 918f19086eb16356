// io/tokenizer/sentencepiece_pieces.h: how SentencePiece writes text into its pieces, shared by every reader of
// SentencePiece vocabularies (a tokenizer.json of the Llama 2 family, a tokenizer.model).
#pragma once

#include <string_view>

namespace kascade {

/// U+2581 "▁": SentencePiece's visible space.
inline constexpr std::string_view kMetaspace = "\xe2\x96\x81";

/// The byte of a byte-fallback piece ("<0xAB>" -> 0xAB, upper-case hex as SentencePiece writes it), or -1 if
/// `piece` is not one.
int byte_fallback_value(std::string_view piece);

}  // namespace kascade
