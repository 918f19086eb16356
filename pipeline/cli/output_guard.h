// pipeline/cli/output_guard.h: what a command may replace at a path the user gave. kascade never overwrites a file
// it did not write (a model, a text, a folder made by hand) unless the user says so with --force; every command
// that writes to a user-given path checks here first, before it writes anything.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kascade::cli {

/// Refuses, unless `force`, to write the files `names` into `folder` (given as `option`) when any of them exists
/// already: "--out \"DIR\" already holds config.json; kascade does not overwrite files it did not write: choose
/// another folder, or pass --force to replace them". A `folder` that exists but is not a folder is refused always.
void check_may_write_files(std::string_view option, const std::filesystem::path& folder,
                           const std::vector<std::string>& names, bool force);

/// Refuses, unless `force`, to replace the report folder `folder` when it holds anything `kascade report` does not
/// write (index.html, <figure>.png, <figure>.svg, gnuplot/<figure>.gp): files the user added to a report, or a
/// folder made by hand around one. A folder without index.html is no report at all, and write_report refuses it
/// unless it is empty. `shown` names the folder as the user gave it ("--out \"DIR\""); `force_hint` says how to
/// replace it anyway ("pass --force").
void check_may_replace_report(const std::filesystem::path& folder, std::string_view shown, std::string_view force_hint,
                              bool force);

}  // namespace kascade::cli
