// io/atomic_file.h: the one way kascade makes a file visible, all at once. The contents go to a partial file in the
// destination's folder, <final>.partial-<host>-<pid>; commit() fsyncs it, renames it onto <final> and fsyncs the
// folder, so that after a crash or a power loss the folder holds the old file or the complete new one, never a
// part. Several processes, on one or on several machines, may write the same file at once: they never share a
// partial file, and the second rename merely replaces a complete file with an identical one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace kascade {

/// A file being written under its partial name. Destroyed without commit() (an exception), it removes the partial
/// file. Either write() the contents through it, or let a library (HDF5) write partial_path() and then commit().
class AtomicFile {
  public:
    /// Creates final_path's folder if needed; opens nothing yet.
    explicit AtomicFile(std::filesystem::path final_path);
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    const std::filesystem::path& final_path() const { return final_path_; }
    const std::filesystem::path& partial_path() const { return partial_path_; }

    /// Appends to the partial file (created, empty, on the first call).
    void write(const void* data, std::size_t n);
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }

    /// fsync the partial file, rename it onto final_path(), fsync the folder. Errors name the file and the OS reason.
    void commit();

  private:
    std::filesystem::path final_path_;
    std::filesystem::path partial_path_;
    int fd_ = -1;
    bool committed_ = false;
};

/// Writes `contents` to `path` as one AtomicFile.
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);

/// Makes `to` a complete copy of `from`: a hard link where the file system allows one (kascade never changes a kept
/// file in place), else a copy; as an AtomicFile.
void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

/// This machine's host name (gethostname).
std::string host_name();

/// <final_path>.partial-<host>-<pid> for the calling process.
std::filesystem::path partial_path_for(const std::filesystem::path& final_path);

/// Whether `file_name` is a partial file written by a process of this host that no longer exists (a killed
/// writer): safe to delete. Partial files of other hosts are never abandoned from here, whatever their pid.
bool is_abandoned_partial(std::string_view file_name);

}  // namespace kascade
