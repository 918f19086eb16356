// pipeline/report/report.h: `kascade report`, a self-contained HTML page with the figures a researcher would put in
// a paper, drawn by gnuplot from the results database (figures: report_figures.h, long-context task figures:
// report_task_figures.h).
//
// The report is written into <out>.partial-<pid> and renamed to <out> only when every image is drawn, so a failed
// or interrupted report leaves the previous one (if any) in place and nothing half-written.
#pragma once

#include <filesystem>
#include <string>

#include "pipeline/report/report_data.h"

namespace kascade {

/// What a report shows (`selection`: a condition given for one kind leaves the other kinds out, and with none the
/// report shows every run and every task run) and where it goes.
struct ReportOptions {
    std::filesystem::path results_dir = "results";
    ReportSelection selection;
    std::filesystem::path out_dir;  ///< empty: default_report_dir(results_dir, "")
    std::string title;              ///< page heading, e.g. the sweep file; empty: "kascade report"
};

struct ReportSummary {
    std::filesystem::path out_dir;  ///< the report folder
    std::filesystem::path html;     ///< <out_dir>/index.html
    int n_runs = 0;
    int n_task_runs = 0;     ///< on generated prompts
    int n_dataset_runs = 0;  ///< task runs on dataset files
    int n_figures = 0;       ///< each as .png and .svg
};

/// <results_dir>/report, or <results_dir>/reports/<name> for a named selection (a sweep file's stem).
std::filesystem::path default_report_dir(const std::filesystem::path& results_dir, const std::string& name);

/// Writes the report. Throws kascade::Error, writing nothing, if gnuplot is missing (naming the package), the
/// results database is missing, a condition of the selection is invalid or matches nothing, nothing is selected (a
/// folder with neither runs nor task runs), or out_dir exists and is not a report.
ReportSummary write_report(const ReportOptions& options);

}  // namespace kascade
