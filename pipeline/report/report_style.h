// pipeline/report/report_style.h: the look every report figure shares (report_figures.cpp, report_task_figures.cpp):
// number formatting for datablocks, the commit label, one colour and marker per method, the plot header and the
// heatmap palette.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace kascade {

/// A datablock value: 6 significant digits, "NaN" (which gnuplot skips) for a non-finite one.
std::string report_num(double v);

/// "kascade 1a2b3c4d5e6f" (or "kascade a, b" when the plotted results come from several builds), bottom right.
std::string report_commit_label(const std::set<std::string>& commits);

struct SeriesStyle {
    std::string color;
    int point = 7;  ///< gnuplot point type; the known methods have filled ones (odd numbers 5-15)
};

/// One colour and marker per method everywhere in a report, so that figures can be compared at a glance; a series
/// not known here gets the fallback_index-th of a few extra styles.
SeriesStyle report_series_style(const std::string& series, size_t fallback_index);

/// A count budget in the one unit every budget axis and budget label of a report uses: keys per query tile (prefill)
/// or per decode step, and KV head. A top-k tile holds `tile` keys (at token granularity, n tiles = n·tile individual
/// keys), a Quest page `page_size` keys. nullopt where the budget is not a count (a percentage; dense).
std::optional<std::int64_t> report_budget_keys(const std::optional<std::int64_t>& topk_tiles,
                                               const std::optional<std::int64_t>& tile,
                                               const std::optional<std::int64_t>& page_size);

/// Grid, border and key of the line and point plots.
extern const std::string kReportPlotHeader;
/// The palette of the similarity heatmaps and head maps (dark blue to yellow).
extern const std::string kReportHeatPalette;

}  // namespace kascade
