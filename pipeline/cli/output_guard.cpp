// pipeline/cli/output_guard.cpp: see output_guard.h.
#include "pipeline/cli/output_guard.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"

namespace kascade::cli {

namespace fs = std::filesystem;

void check_may_write_files(std::string_view option, const fs::path& folder, const std::vector<std::string>& names,
                           bool force) {
    std::error_code ec;
    const fs::file_status status = fs::status(folder, ec);
    if (!fs::exists(status)) return;
    KASCADE_CHECK(fs::is_directory(status), "{} \"{}\" exists and is not a folder", option, folder.string());
    if (force) return;
    std::vector<std::string> existing;
    for (const std::string& name : names) {
        if (fs::exists(fs::symlink_status(folder / name, ec))) existing.push_back(name);
    }
    KASCADE_CHECK(existing.empty(),
                  "{} \"{}\" already holds {}; kascade does not overwrite files it did not write: choose another "
                  "folder, or pass --force to replace {}",
                  option, folder.string(), fmt::join(existing, " and "), existing.size() == 1 ? "it" : "them");
}

namespace {

/// The first entry of a report folder that `kascade report` does not write ("" if there is none).
std::string foreign_report_entry(const fs::path& folder) {
    std::error_code ec;
    for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
        const fs::path& p = entry.path();
        const std::string name = p.filename().string();
        if (name == "index.html" && entry.is_regular_file(ec)) continue;
        if (name == "gnuplot" && entry.is_directory(ec) && !entry.is_symlink(ec)) {
            for (const fs::directory_entry& script : fs::directory_iterator(p, ec)) {
                if (script.path().extension() != ".gp" || !script.is_regular_file(ec)) {
                    return "gnuplot/" + script.path().filename().string();
                }
            }
            continue;
        }
        // A figure is <name>.png and <name>.svg beside the script gnuplot/<name>.gp that drew it.
        const bool figure = (p.extension() == ".png" || p.extension() == ".svg") && entry.is_regular_file(ec) &&
                            fs::is_regular_file(folder / "gnuplot" / (p.stem().string() + ".gp"), ec);
        if (!figure) return name;
    }
    return "";
}

}  // namespace

void check_may_replace_report(const fs::path& folder, std::string_view shown, std::string_view force_hint, bool force) {
    std::error_code ec;
    // What is not a folder, or a folder without index.html, is not a report: write_report refuses it unless empty.
    if (force || !fs::is_directory(fs::symlink_status(folder, ec)) || !fs::is_regular_file(folder / "index.html", ec))
        return;
    const std::string foreign = foreign_report_entry(folder);
    KASCADE_CHECK(foreign.empty(),
                  "{} holds \"{}\", which kascade report did not write; a report replaces its whole folder and "
                  "kascade does not delete files it did not write: choose another folder, or {} to replace it",
                  shown, foreign, force_hint);
}

}  // namespace kascade::cli
