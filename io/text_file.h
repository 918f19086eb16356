// io/text_file.h: reading a text corpus for tokenization.
#pragma once

#include <filesystem>
#include <string>

namespace kascade {

/// The whole file as bytes; an error names the file if it is missing, unreadable or empty.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace kascade
