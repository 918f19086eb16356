// pipeline/report/report_task_figures.h: the figures of a report's long-context task runs (report_task_data.h):
// needle heatmaps and score against density, one figure of each per model x task x haystack; for task runs on
// dataset files, score against density per model x chat template, one panel per dataset.
#pragma once

#include <vector>

#include "pipeline/report/report_data.h"
#include "pipeline/report/report_figures.h"

namespace kascade {

/// Mean score per needle depth (y, % of the haystack, 0 at the top) and prompt length (x), one panel per task run
/// (method configuration), all panels on one colour scale [0, 1].
std::vector<ReportFigure> needle_heatmap_figures(const ReportData& data);
/// Mean score against mean density per task run, one series per method and prefill mode; a panel over all lengths,
/// then one per prompt length when there are several.
std::vector<ReportFigure> task_density_figures(const ReportData& data);
/// Mean score against mean density per dataset run, one series per method and prefill mode, one panel per dataset.
std::vector<ReportFigure> dataset_density_figures(const ReportData& data);

}  // namespace kascade
