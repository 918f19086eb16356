// tests/report/report_check.h: independent checks of what `kascade report` writes: PNG files decoded with libpng,
// SVG headers and colours read from the XML text, the files an HTML page refers to, the page rendered by headless
// Chromium, database rows read with plain sqlite3, and results folders shared by the tests of this area.
#pragma once

#include <fcntl.h>
#include <png.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "cli/run_command.h"
#include "common/db_rows.h"

namespace fs = std::filesystem;

/// The build folder: KASCADE_BIN is <build>/pipeline/kascade.
inline const fs::path kBuildDir = fs::path(KASCADE_BIN).parent_path().parent_path();

/// How far a number in a report's tables may be from the value it shows: they are printed with 4 decimals.
inline constexpr double kTablePrecision = 0.5e-4 + 1e-9;

struct DecodedImage {
    int width = 0, height = 0;
    int distinct_colours = 0;  ///< counted up to 16
    std::string error;         ///< empty when the file decoded
};

/// Decodes a PNG with libpng (not with anything kascade or gnuplot wrote) and counts its distinct RGBA colours.
inline DecodedImage decode_png(const fs::path& path) {
    DecodedImage out;
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&image, path.c_str())) {
        out.error = image.message;
        return out;
    }
    image.format = PNG_FORMAT_RGBA;
    std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(image));
    if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
        out.error = image.message;
        return out;
    }
    out.width = static_cast<int>(image.width);
    out.height = static_cast<int>(image.height);
    std::unordered_set<std::uint32_t> colours;
    for (size_t i = 0; i + 3 < pixels.size() && colours.size() < 16; i += 4) {
        colours.insert(std::uint32_t(pixels[i]) << 24 | std::uint32_t(pixels[i + 1]) << 16 |
                       std::uint32_t(pixels[i + 2]) << 8 | pixels[i + 3]);
    }
    out.distinct_colours = static_cast<int>(colours.size());
    return out;
}

/// Reads an SVG's width/height attributes and counts the distinct fill/stroke colours it draws with.
inline DecodedImage inspect_svg(const fs::path& path) {
    DecodedImage out;
    const std::string svg = read_all(path);
    std::smatch m;
    if (!std::regex_search(svg, m, std::regex(R"re(<svg[^>]*\swidth="(\d+)"[^>]*\sheight="(\d+)")re"))) {
        out.error = "no <svg width=.. height=..> element";
        return out;
    }
    out.width = std::stoi(m[1]);
    out.height = std::stoi(m[2]);
    if (svg.find("</svg>") == std::string::npos) out.error = "no closing </svg> (truncated file)";
    std::set<std::string> colours;
    const std::regex colour(R"re((?:fill|stroke)\s*=\s*['"](#[0-9a-fA-F]{6}|rgb\([^)]*\)))re");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), colour); it != std::sregex_iterator(); ++it) {
        std::string c = (*it)[1];
        std::erase(c, ' ');
        colours.insert(c);
    }
    out.distinct_colours = static_cast<int>(colours.size());
    return out;
}

struct ImageRef {
    std::string src;
    int width = 0, height = 0;
};

/// Every <img src=.. width=.. height=..> of a page, in order.
inline std::vector<ImageRef> html_images(const std::string& html) {
    std::vector<ImageRef> out;
    const std::regex img(R"re(<img\s+src="([^"]+)"\s+width="(\d+)"\s+height="(\d+)")re");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), img); it != std::sregex_iterator(); ++it) {
        out.push_back({(*it)[1], std::stoi((*it)[2]), std::stoi((*it)[3])});
    }
    return out;
}

/// Every src= and href= value of a page (in-page anchors "#..." excluded).
inline std::vector<std::string> html_references(const std::string& html) {
    std::vector<std::string> out;
    const std::regex ref(R"re((?:src|href)="([^"]*)")re");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator(); ++it) {
        const std::string value = (*it)[1];
        if (!value.starts_with("#")) out.push_back(value);
    }
    return out;
}

/// An executable on PATH, if there is one.
inline std::optional<fs::path> find_on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return fs::path(dir) / name;
    }
    return std::nullopt;
}

/// The rows of datablock `name` in a gnuplot script, each as its text line (blank lines left out).
inline std::vector<std::string> datablock_lines(const std::string& script, const std::string& name) {
    std::vector<std::string> rows;
    const size_t start = script.find("$" + name + " << EOD\n");
    if (start == std::string::npos) return rows;
    std::istringstream in(script.substr(script.find('\n', start) + 1));
    for (std::string line; std::getline(in, line) && line != "EOD";) {
        if (!line.empty()) rows.push_back(line);
    }
    return rows;
}

/// The cells of the table with this id: the header row's names, then one map per row from name to cell text.
inline std::vector<std::map<std::string, std::string>> html_table(const std::string& html, const std::string& id) {
    std::vector<std::map<std::string, std::string>> rows;
    std::smatch table;
    if (!std::regex_search(html, table, std::regex("<table id=\"" + id + "\">([\\s\\S]*?)</table>"))) return rows;
    const std::string body = table[1];
    const std::regex row_re("<tr>([\\s\\S]*?)</tr>"), cell_re("<t[dh]>([^<]*)</t[dh]>");
    std::vector<std::string> header;
    for (auto r = std::sregex_iterator(body.begin(), body.end(), row_re); r != std::sregex_iterator(); ++r) {
        const std::string row = (*r)[1];
        std::vector<std::string> cells;
        for (auto c = std::sregex_iterator(row.begin(), row.end(), cell_re); c != std::sregex_iterator(); ++c)
            cells.push_back((*c)[1]);
        if (header.empty()) {
            header = cells;
            continue;
        }
        std::map<std::string, std::string> named;
        for (size_t i = 0; i < cells.size() && i < header.size(); ++i) named[header[i]] = cells[i];
        rows.push_back(named);
    }
    return rows;
}

/// Runs a shell command line, returning its exit code (output to the given log file).
inline int run_shell_logged(const std::string& command, const fs::path& log) {
    const int status = std::system((command + " >" + shell_quote(log.string()) + " 2>&1 </dev/null").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Renders a page with headless Chromium into a PNG screenshot of width x height pixels; returns Chromium's exit
/// code (its output in `log`). `scratch` holds its profile folder.
inline int chromium_screenshot(const fs::path& chromium, const fs::path& html, const fs::path& shot,
                               const fs::path& scratch, const fs::path& log, int width = 1280, int height = 1600) {
    // The flags the machine's headless Chromium needs: no sandbox (root), no GPU, no network of its own.
    const std::string command =
        "timeout 120 " + shell_quote(chromium.string()) +
        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking "
        "--disable-component-update --disable-sync --user-data-dir=" +
        shell_quote((scratch / "chromium-profile").string()) + " --window-size=" + std::to_string(width) + "," +
        std::to_string(height) + " --screenshot=" + shell_quote(shot.string()) + " " +
        shell_quote("file://" + html.string());
    return run_shell_logged(command, log);
}

/// The number of pixels of a PNG with exactly this colour (0xRRGGBB, opaque); -1 if the file does not decode.
inline long count_pixels(const fs::path& path, std::uint32_t rgb) {
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&image, path.c_str())) return -1;
    image.format = PNG_FORMAT_RGB;
    std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(image));
    if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) return -1;
    long n = 0;
    for (size_t i = 0; i + 2 < pixels.size(); i += 3)
        n += (std::uint32_t(pixels[i]) << 16 | std::uint32_t(pixels[i + 1]) << 8 | pixels[i + 2]) == rgb;
    return n;
}

/// Holds the exclusive lock on a results folder shared by the test processes of this area (see shared_quick_sweep):
/// while it is held no other test process fills it, so nothing there (a report included) is rewritten.
class SharedResultsLock {
  public:
    explicit SharedResultsLock(const fs::path& results) {
        fs::create_directories(results.parent_path());
        fd_ = ::open((results.string() + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
        ::flock(fd_, LOCK_EX);
    }
    ~SharedResultsLock() {
        ::flock(fd_, LOCK_UN);
        ::close(fd_);
    }
    SharedResultsLock(const SharedResultsLock&) = delete;
    SharedResultsLock& operator=(const SharedResultsLock&) = delete;

  private:
    int fd_ = -1;
};

/// Runs experiments/stories260k-quick.toml into `results`; the caller holds a SharedResultsLock on it.
inline std::string run_quick_sweep_locked(const fs::path& results, const std::string& extra_args = "") {
    ::setenv("KASCADE_ASSETS", KASCADE_SHARED_DIR, 1);
    const CommandResult r =
        run_kascade("sweep " + shell_quote(std::string(KASCADE_SOURCE_DIR) + "/experiments/stories260k-quick.toml") +
                    " --results " + shell_quote(results.string()) + " " + extra_args);
    return r.exit_code == 0 ? r.out : "sweep failed (" + std::to_string(r.exit_code) + "): " + r.err;
}

/// The results of experiments/stories260k-quick.toml, shared by every test process of this area: a folder in the
/// build tree, filled by the sweep under an exclusive lock (the sweep reuses what is stored, so only the first test
/// computes; later ones take about a second). Returns the sweep's output.
inline std::string shared_quick_sweep(const fs::path& results, const std::string& extra_args = "") {
    const SharedResultsLock lock(results);
    return run_quick_sweep_locked(results, extra_args);
}

/// Copies a SQLite database with SQLite's online backup (a plain file copy would miss what is still in the WAL).
inline bool copy_database(const fs::path& from, const fs::path& to) {
    sqlite3 *src = nullptr, *dst = nullptr;
    bool ok = sqlite3_open_v2(from.c_str(), &src, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
              sqlite3_busy_timeout(src, kTestDbBusyTimeoutMs) == SQLITE_OK &&
              sqlite3_open(to.c_str(), &dst) == SQLITE_OK;
    if (ok) {
        sqlite3_backup* backup = sqlite3_backup_init(dst, "main", src, "main");
        ok = backup != nullptr && sqlite3_backup_step(backup, -1) == SQLITE_DONE;
        sqlite3_backup_finish(backup);
    }
    sqlite3_close(src);
    sqlite3_close(dst);
    return ok;
}
