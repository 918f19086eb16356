// io/store/partial_file.h: how results files are made visible atomically in a folder that several processes, on
// one or on several machines, write at once: each writer writes <final>.partial-<host>-<pid> and renames it to
// <final>. Two writers of the same file (the same content key) never share a partial file, and the rename of the
// second merely replaces a complete file with an identical one, so both succeed.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kascade {

/// This machine's host name (gethostname).
std::string host_name();

/// <final_path>.partial-<host>-<pid> for the calling process.
std::filesystem::path partial_path_for(const std::filesystem::path& final_path);

/// Whether `file_name` is a partial file written by a process of this host that no longer exists (a killed
/// writer): safe to delete. Partial files of other hosts are never abandoned from here, whatever their pid.
bool is_abandoned_partial(std::string_view file_name);

/// Makes `to` a complete copy of `from`: a hard link where the file system allows one (artifacts are never
/// changed in place), else a copy, written under a partial name, synced, then renamed to `to`.
void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace kascade
