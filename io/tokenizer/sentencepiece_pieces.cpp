// io/tokenizer/sentencepiece_pieces.cpp: see sentencepiece_pieces.h.
#include "io/tokenizer/sentencepiece_pieces.h"

namespace kascade {

int byte_fallback_value(std::string_view piece) {
    if (piece.size() != 6 || !piece.starts_with("<0x") || piece[5] != '>') return -1;
    int value = 0;
    for (const char c : piece.substr(3, 2)) {
        value *= 16;
        if (c >= '0' && c <= '9') {
            value += c - '0';
        } else if (c >= 'A' && c <= 'F') {
            value += c - 'A' + 10;
        } else {
            return -1;
        }
    }
    return value;
}

namespace {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    std::string out;
    std::size_t last = 0;
    for (std::size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, last)) {
        out.append(text.substr(last, at - last));
        out.append(to);
        last = at + from.size();
    }
    out.append(text.substr(last));
    return out;
}

}  // namespace

std::string spaces_to_metaspace(std::string_view text) {
    return replace_all(text, " ", kMetaspace);
}

std::string metaspace_to_spaces(std::string_view text) {
    return replace_all(text, kMetaspace, " ");
}

std::size_t utf8_sequence_length(unsigned char lead) {
    if (lead >= 0xF0) return 4;
    if (lead >= 0xE0) return 3;
    if (lead >= 0xC0) return 2;
    return 1;
}

}  // namespace kascade
