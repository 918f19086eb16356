#include "entries/fuzz_support.h"

#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <system_error>

namespace kascade::fuzz {

namespace {

class ScratchDir {
  public:
    ScratchDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "kascade-fuzz-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) {
            std::perror("kascade fuzz: cannot create a scratch folder");
            std::abort();
        }
        path_ = pattern;
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
};

}  // namespace

const std::filesystem::path& scratch_dir() {
    static const ScratchDir dir;
    return dir.path();
}

std::filesystem::path write_input_file(std::string_view name, FuzzInput input) {
    const std::filesystem::path path = scratch_dir() / name;
    // A new file rather than the old one truncated: ext4 flushes a truncated file to disk when it is closed
    // (auto_da_alloc), which made every run wait for the disk.
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
    out.close();
    if (!out) {
        std::fprintf(stderr, "kascade fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
    return path;
}

void require(bool holds, std::string_view what) {
    if (holds) return;
    std::fprintf(stderr, "kascade fuzz: broken invariant: %.*s\n", static_cast<int>(what.size()), what.data());
    std::abort();
}

}  // namespace kascade::fuzz
