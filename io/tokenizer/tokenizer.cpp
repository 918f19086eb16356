#include "io/tokenizer/tokenizer.h"

namespace kascade {

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string text;
    int32_t prev = -1;
    for (const int32_t id : ids) {
        text += decode_piece(prev, id);
        prev = id;
    }
    return text;
}

}  // namespace kascade
