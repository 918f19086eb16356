// pipeline/tasks/python_text.h: Python's reading of text where kascade must reproduce it (LongBench's str.split(),
// a chat template's strip()/trim).
#pragma once

namespace kascade {

/// Python 3.11's str.isspace(): the characters str.split() splits at and str.strip() removes (checked over all code
/// points).
inline bool is_python_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace kascade
