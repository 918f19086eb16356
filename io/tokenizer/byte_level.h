// io/tokenizer/byte_level.h: GPT-2's byte-to-unicode mapping, which lets byte-level BPE vocabularies store every
// byte as a printable character.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace kascade {

/// For each byte, the UTF-8 encoding of the character GPT-2 stands it for: printable Latin-1 bytes ('!'..'~',
/// '¡'..'¬', '®'..'ÿ') map to themselves, the other 68 bytes to U+0100 onwards in byte order (' ' -> 'Ġ').
const std::array<std::string, 256>& byte_level_chars();

/// The bytes a byte-level token string stands for, appended to `out`. Returns false (leaving `out` partly
/// appended) if `token` has a character that is not in the mapping.
bool byte_level_decode(std::string_view token, std::string& out);

}  // namespace kascade
