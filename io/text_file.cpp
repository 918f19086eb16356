#include "io/text_file.h"

#include "base/error.h"
#include "io/file_util.h"

namespace kascade {

std::string read_text_file(const std::filesystem::path& path) {
    KASCADE_CHECK(std::filesystem::exists(path), "text file \"{}\" does not exist", path.string());
    KASCADE_CHECK(!std::filesystem::is_directory(path), "text file \"{}\" is a directory, expected a file",
                  path.string());
    std::string text = read_file(path);
    KASCADE_CHECK(!text.empty(), "text file \"{}\" is empty: there is nothing to tokenize", path.string());
    return text;
}

}  // namespace kascade
