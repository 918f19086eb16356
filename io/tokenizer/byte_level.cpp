// io/tokenizer/byte_level.cpp: the GPT-2 bytes_to_unicode() table and its inverse.
#include "io/tokenizer/byte_level.h"

#include <cstdint>

namespace kascade {

namespace {

bool is_printable_latin1(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::string utf8_encode(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

/// Codepoint -> byte for the 256 mapped characters, all below U+0144.
struct Inverse {
    std::array<int16_t, 0x144> byte_of;
    Inverse() {
        byte_of.fill(-1);
        int next = 0x100;
        for (int b = 0; b < 256; ++b) byte_of[is_printable_latin1(b) ? b : next++] = static_cast<int16_t>(b);
    }
};

}  // namespace

const std::array<std::string, 256>& byte_level_chars() {
    static const std::array<std::string, 256> chars = [] {
        std::array<std::string, 256> table;
        uint32_t next = 0x100;
        for (int b = 0; b < 256; ++b) table[b] = utf8_encode(is_printable_latin1(b) ? b : next++);
        return table;
    }();
    return chars;
}

bool byte_level_decode(std::string_view token, std::string& out) {
    static const Inverse inverse;
    std::size_t i = 0;
    while (i < token.size()) {
        // Every mapped character is U+0000..U+0143: one or two UTF-8 bytes.
        const auto lead = static_cast<unsigned char>(token[i]);
        uint32_t cp;
        if (lead < 0x80) {
            cp = lead;
            i += 1;
        } else if ((lead & 0xE0) == 0xC0 && i + 1 < token.size() &&
                   (static_cast<unsigned char>(token[i + 1]) & 0xC0) == 0x80) {
            cp = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
            i += 2;
        } else {
            return false;
        }
        if (cp >= inverse.byte_of.size() || inverse.byte_of[cp] < 0) return false;
        out += static_cast<char>(inverse.byte_of[cp]);
    }
    return true;
}

}  // namespace kascade
