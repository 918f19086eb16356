// pipeline/report/report_style.h: the look every report figure shares (report_figures.cpp, report_task_figures.cpp):
// number formatting for datablocks, the commit label, one colour and marker per method, the plot header and the
// heatmap palette.
#pragma once

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

/// Grid, border and key of the line and point plots.
extern const std::string kReportPlotHeader;
/// The palette of the similarity heatmaps and head maps (dark blue to yellow).
extern const std::string kReportHeatPalette;

}  // namespace kascade
