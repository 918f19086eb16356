// pipeline/report/gnuplot.h: figures drawn by gnuplot (Debian package gnuplot-nox), written as PNG and SVG.
//
// Each figure is one self-contained gnuplot script (its data in datablocks) that draws the same picture once per
// format; the scripts are kept beside the images, so a researcher can edit one and re-run it with
// `cd <report> && gnuplot gnuplot/<name>.gp`.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

/// The Debian package that provides gnuplot with the pngcairo and svg terminals.
inline constexpr std::string_view kGnuplotPackage = "gnuplot-nox";

struct GnuplotFigure {
    std::string name;        ///< file stem: <name>.png, <name>.svg, gnuplot/<name>.gp
    int width = 900;         ///< pixels (PNG) and SVG user units
    int height = 560;        ///< pixels (PNG) and SVG user units
    std::string datablocks;  ///< "$name << EOD ... EOD" definitions the body reads (gnuplot_datablock)
    std::string body;        ///< commands that draw the figure; terminal and output are set around them
};

/// The gnuplot executable on PATH; throws kascade::Error naming the package to install if there is none.
std::filesystem::path find_gnuplot();

/// A gnuplot string literal (double-quoted: "\n" in `text` becomes a line break, quotes and backslashes escaped).
std::string gnuplot_string(std::string_view text);

/// A datablock definition: "$<name> << EOD\n<rows>EOD\n" (rows: lines of whitespace-separated values; two blank
/// lines separate the blocks selected by `index`).
std::string gnuplot_datablock(std::string_view name, std::string_view rows);

/// The script of a figure: datablocks, then the body once for PNG (pngcairo) and once for SVG.
std::string gnuplot_script(const GnuplotFigure& figure);

/// Writes every figure's script to <dir>/gnuplot/<name>.gp and runs gnuplot on them in <dir> (one process), which
/// writes <dir>/<name>.png and <dir>/<name>.svg. Throws kascade::Error with gnuplot's own message if it fails.
void render_figures(const std::filesystem::path& gnuplot, const std::filesystem::path& dir,
                    const std::vector<GnuplotFigure>& figures);

}  // namespace kascade
