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

}  // namespace kascade
