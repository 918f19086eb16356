// io/weights/zip_archive.h: the entries of a zip archive (a PyTorch checkpoint is one), read through Debian's libzip;
// an entry stored uncompressed is used in place in the memory-mapped file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/file_util.h"

struct zip;  // libzip's archive handle (zip_t)

namespace kascade {

/// A memory-mapped zip archive opened with libzip, which checks the central directory against every local header
/// at open (ZIP_CHECKCONS). Errors are kascade::Error naming the archive and, where one is involved, the entry.
class ZipArchive {
  public:
    explicit ZipArchive(const std::filesystem::path& path);
    ~ZipArchive();
    ZipArchive(const ZipArchive&) = delete;
    ZipArchive& operator=(const ZipArchive&) = delete;

    const std::filesystem::path& path() const { return file_.path(); }
    /// The entry names, in the order of the central directory.
    const std::vector<std::string>& names() const { return names_; }
    bool contains(const std::string& name) const { return index_.count(name) != 0; }

    /// The bytes of entry `name`, valid as long as the archive: a view of the mapped file when the entry is stored
    /// (PyTorch stores every entry so), else the entry inflated into memory the archive keeps (its CRC checked).
    std::span<const std::uint8_t> entry(const std::string& name);

  private:
    struct Source;  // the libzip source over the mapping
    struct Discard {
        void operator()(zip* archive) const;
    };

    /// Where the stored entry `index` of `size` bytes starts in the file, or -1 when that cannot be confirmed.
    std::int64_t stored_data_offset(std::uint64_t index, std::uint64_t size, const std::string& name);
    std::span<const std::uint8_t> inflate(std::uint64_t index, std::uint64_t size, const std::string& name);

    MappedFile file_;
    std::unique_ptr<Source> source_;
    std::unique_ptr<zip, Discard> archive_;  // after source_: closed before it
    std::vector<std::string> names_;
    std::map<std::string, std::uint64_t> index_;
    std::vector<std::unique_ptr<std::uint8_t[]>> inflated_;
};

}  // namespace kascade
