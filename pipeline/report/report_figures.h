// pipeline/report/report_figures.h: the figures of a report, each a gnuplot figure with the heading and caption the
// HTML page shows beside it.
#pragma once

#include <string>
#include <vector>

#include "pipeline/report/gnuplot.h"
#include "pipeline/report/report_data.h"

namespace kascade {

/// The sections of a report page, in page order.
enum class ReportSection {
    Pareto,
    TopK,
    Similarity,
    Schedules,
    Runs,
    Kernels,
    TaskHeatmaps,
    TaskDensity,
    DatasetDensity
};

struct ReportFigure {
    ReportSection section = ReportSection::Pareto;
    std::string heading;  ///< one line: what is plotted, for which model / text / parameters
    std::string caption;  ///< how to read it
    GnuplotFigure plot;
};

/// Degradation % vs density, one marker per run and the Pareto front per method; one panel per model x text x ctx.
std::vector<ReportFigure> pareto_figures(const ReportData& data);
/// Perplexity vs top-k budget, one curve per setting; one panel per model x text x ctx x test range x budget kind.
std::vector<ReportFigure> topk_figures(const ReportData& data);
/// Per similarity artifact: layer x layer recall (mean and min over query tiles) and the per-layer importance.
std::vector<ReportFigure> similarity_figures(const ReportData& data);
/// Per schedule: the layer diagram (roles, the anchor each reuse layer follows) and its head maps.
std::vector<ReportFigure> schedule_figures(const ReportData& data);
/// Per sparse run: per-layer density and attention output error vs dense.
std::vector<ReportFigure> run_figures(const ReportData& data);
/// From kernel_bench: speed-up vs context length per layer type (none if the table has no such rows).
std::vector<ReportFigure> kernel_figures(const ReportData& data);

}  // namespace kascade
