// tests/common/temp_dir.h: a fresh folder for one test, removed with everything in it when the test is done.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace kascade::test {

class TempDir {
  public:
    /// Creates <system temp>/kascade-<label>-XXXXXX (unique even across parallel test processes).
    explicit TempDir(std::string_view label = "test") {
        std::string pattern =
            (std::filesystem::temp_directory_path() / ("kascade-" + std::string(label) + "-XXXXXX")).string();
        path_ = ::mkdtemp(pattern.data());
    }
    ~TempDir() {
        std::error_code ignored;
        // A test may have made the folder read-only (an unwritable results folder); make it removable again.
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

    /// Writes `contents` to the file `name` in the folder and returns its path.
    std::filesystem::path write(std::string_view name, std::string_view contents) const {
        const std::filesystem::path file = path_ / name;
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
        return file;
    }

  private:
    std::filesystem::path path_;
};

}  // namespace kascade::test
