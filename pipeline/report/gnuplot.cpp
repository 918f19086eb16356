#include "pipeline/report/gnuplot.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"
#include "io/file_util.h"

namespace kascade {

namespace fs = std::filesystem;

fs::path find_gnuplot() {
    const char* path = std::getenv("PATH");
    std::string_view dirs = path != nullptr ? path : "";
    while (!dirs.empty()) {
        const size_t colon = dirs.find(':');
        const std::string_view dir = dirs.substr(0, colon);
        dirs = colon == std::string_view::npos ? std::string_view() : dirs.substr(colon + 1);
        if (dir.empty()) continue;
        const fs::path candidate = fs::path(dir) / "gnuplot";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    KASCADE_FAIL(
        "gnuplot is not installed (no gnuplot on PATH); reports are drawn by gnuplot: install the Debian "
        "package {} (apt-get install {})",
        kGnuplotPackage, kGnuplotPackage);
}

std::string gnuplot_string(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

std::string gnuplot_datablock(std::string_view name, std::string_view rows) {
    std::string out = fmt::format("${} << EOD\n", name);
    out += rows;
    if (!rows.empty() && rows.back() != '\n') out += '\n';
    return out + "EOD\n";
}

std::string gnuplot_script(const GnuplotFigure& f) {
    // noenhanced: titles hold file names and parameters with '_' and '^', which enhanced text would typeset.
    return fmt::format(
        "# {name}: drawn by `kascade report`; run from the report folder: gnuplot gnuplot/{name}.gp\n"
        "{data}"
        "do for [format in \"png svg\"] {{\n"
        "reset\n"
        "if (format eq \"png\") {{\n"
        "  set terminal pngcairo size {w},{h} noenhanced font \"Sans,10\" background rgb \"#ffffff\"\n"
        "}} else {{\n"
        "  set terminal svg size {w},{h} fixed noenhanced font \"Sans,10\" background rgb \"#ffffff\"\n"
        "}}\n"
        "set output \"{name}.\".format\n"
        "{body}"
        "unset output\n"
        "}}\n",
        fmt::arg("name", f.name), fmt::arg("data", f.datablocks), fmt::arg("w", f.width), fmt::arg("h", f.height),
        fmt::arg("body", f.body));
}

void render_figures(const fs::path& gnuplot, const fs::path& dir, const std::vector<GnuplotFigure>& figures) {
    if (figures.empty()) return;
    fs::create_directories(dir / "gnuplot");
    std::vector<std::string> args = {gnuplot.string()};
    for (const GnuplotFigure& f : figures) {
        const std::string script = "gnuplot/" + f.name + ".gp";
        std::ofstream(dir / script) << gnuplot_script(f);
        args.push_back(script);
    }
    const fs::path log = dir / "gnuplot" / "gnuplot.log";
    const pid_t pid = ::fork();
    KASCADE_CHECK(pid >= 0, "cannot start gnuplot ({}): fork failed", gnuplot.string());
    if (pid == 0) {
        // Child: run in the report folder so that the scripts' relative output names land there.
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || ::chdir(dir.c_str()) != 0) ::_exit(126);
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string output = fs::exists(log) ? read_file(log) : std::string();
    while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    KASCADE_CHECK(ok, "gnuplot ({}) failed{}: {}", gnuplot.string(),
                  WIFEXITED(status) ? fmt::format(" with exit code {}", WEXITSTATUS(status)) : " (killed)",
                  output.empty() ? "no output" : output);
    fs::remove(log);
}

}  // namespace kascade
