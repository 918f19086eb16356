// io/file_util.h: reading whole files, memory-mapping and content hashes (atomic writes: atomic_file.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kascade {

/// Every file kascade reads is opened through read_file, MappedFile or check_regular_file, which refuse what is not
/// a regular file: a FIFO would block the reader until a writer comes and a device (/dev/zero) never ends, so
/// either would hang the command or grow its memory without bound.
///
/// Throws kascade::Error if `path` is missing or not a regular file ("cannot read \"x\": it is a FIFO (named
/// pipe), expected a regular file"), without opening anything that is not one.
void check_regular_file(const std::filesystem::path& path);

/// Reads a whole regular file; throws kascade::Error naming the path and the OS reason if it cannot.
std::string read_file(const std::filesystem::path& path);

/// A read-only memory map of a whole regular file. Movable, not copyable.
class MappedFile {
  public:
    MappedFile() = default;
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
    std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

/// 64-bit XXH3 hash as 16 lowercase hex digits (content keys, model and text fingerprints).
std::string hash_hex(std::string_view bytes);
std::string hash_file_hex(const std::filesystem::path& path);

}  // namespace kascade
