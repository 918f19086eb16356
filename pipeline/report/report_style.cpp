#include "pipeline/report/report_style.h"

#include <cmath>
#include <iterator>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline/report/gnuplot.h"

namespace kascade {

std::string report_num(double v) {
    return std::isfinite(v) ? fmt::format("{:.6g}", v) : "NaN";
}

std::string report_commit_label(const std::set<std::string>& commits) {
    std::vector<std::string> list;
    for (const std::string& c : commits) {
        if (!c.empty()) list.push_back(c);
    }
    const std::string text =
        list.empty() ? "kascade (commit unknown)" : fmt::format("kascade {}", fmt::join(list, ", "));
    return fmt::format("set label 99 {} at screen 0.995, screen 0.012 right font \",8\" textcolor rgb \"#555555\"\n",
                       gnuplot_string(text));
}

std::optional<std::int64_t> report_budget_keys(const std::optional<std::int64_t>& topk_tiles,
                                               const std::optional<std::int64_t>& tile,
                                               const std::optional<std::int64_t>& page_size) {
    if (!topk_tiles) return std::nullopt;
    // Quest's budget counts pages; every other method's counts tiles. A run has one or the other (never both).
    const std::optional<std::int64_t> block = page_size ? page_size : tile;
    if (!block) return std::nullopt;
    return *topk_tiles * *block;
}

SeriesStyle report_series_style(const std::string& series, size_t fallback_index) {
    static const std::map<std::string, SeriesStyle> known = {
        {"dense", {"#000000", 5}},        {"kascade (threshold)", {"#1f77b4", 7}},
        {"kascade (dp)", {"#ff7f0e", 9}}, {"kascade (fixed)", {"#9467bd", 11}},
        {"kascade", {"#1f77b4", 7}},      {"oracle", {"#2ca02c", 13}},
        {"streaming", {"#d62728", 15}},   {"quest", {"#8c564b", 4}},
        {"omnikv", {"#e377c2", 6}},       {"lessismore", {"#17becf", 8}}};
    if (const auto it = known.find(series); it != known.end()) return it->second;
    static const char* extra[] = {"#bcbd22", "#7f7f7f", "#393b79", "#637939", "#843c39", "#7b4173"};
    return {extra[fallback_index % std::size(extra)], static_cast<int>(4 + 2 * (fallback_index % 6))};
}

const std::string kReportPlotHeader =
    "set grid lc rgb \"#dddddd\"\n"
    "set border lc rgb \"#444444\"\n"
    "set key outside right top box lc rgb \"#cccccc\"\n";

const std::string kReportHeatPalette =
    "set palette defined (0 \"#3b528b\", 0.4 \"#21918c\", 0.7 \"#5ec962\", 1 \"#fde725\")\n";

}  // namespace kascade
