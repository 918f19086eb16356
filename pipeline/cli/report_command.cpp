// kascade report: an HTML page with PNG/SVG figures (drawn by gnuplot) of the runs in the results database.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/report/report.h"
#include "pipeline/stages/sweep.h"

namespace kascade::cli {

namespace fs = std::filesystem;

namespace {
struct ReportArgs {
    std::string where;
    std::string sweep;
    std::string out;
};

/// The runs a sweep file asks for (those already stored), as a runs_flat condition on their content keys.
std::string sweep_condition(const std::string& results_dir, const SweepSpec& spec) {
    std::FILE* quiet = std::fopen("/dev/null", "w");
    KASCADE_CHECK(quiet != nullptr, "cannot open /dev/null");
    std::vector<std::string> keys;
    try {
        SweepOptions options;
        options.dry_run = true;
        for (const SweepJob& job : run_sweep(results_dir, spec, options, quiet).jobs) {
            if (job.stage == "eval") keys.push_back("'" + job.key + "'");
        }
    } catch (...) {
        std::fclose(quiet);
        throw;
    }
    std::fclose(quiet);
    return fmt::format("run_key IN ({})", fmt::join(keys, ", "));
}
}  // namespace

void register_report_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* cmd = app.add_subcommand(
        "report", "Write an HTML report with figures (PNG and SVG, drawn by gnuplot) of stored runs");
    cmd->footer(
        "Figures: degradation vs density with Pareto fronts, perplexity vs top-k, layer similarity heatmaps and\n"
        "importance, schedule diagrams and head maps, per-layer density and error of each run, kernel speed-ups.\n"
        "Needs gnuplot (Debian package gnuplot-nox). The folder is replaced only when the new report is complete.\n"
        "Examples:\n"
        "  kascade report                                              # every run -> results/report/index.html\n"
        "  kascade report --sweep experiments/stories260k-quick.toml   # -> results/reports/stories260k-quick/\n"
        "  kascade report --where \"ctx = 512 AND method != 'streaming'\" --out /tmp/ctx512");
    auto* where = cmd->add_option("--where", args->where, "SQL condition on runs_flat columns selecting the runs");
    auto* sweep = cmd->add_option("--sweep", args->sweep, "the runs of this sweep file (those already stored)");
    where->excludes(sweep);
    cmd->add_option("--out", args->out,
                    "report folder (default: <results>/report, or <results>/reports/<sweep name> with --sweep)");
    cmd->callback([args, &common] {
        ReportOptions options;
        options.results_dir = common.results_dir;
        options.where = args->where;
        std::string name;
        if (!args->sweep.empty()) {
            const SweepSpec spec = load_sweep_spec(args->sweep);
            options.where = sweep_condition(common.results_dir, spec);
            name = spec.file.stem().string();
            options.title = spec.file.filename().string();
        }
        options.out_dir = args->out.empty() ? default_report_dir(common.results_dir, name) : fs::path(args->out);
        const ReportSummary summary = write_report(options);
        std::printf("report: %s (%d runs, %d figures as PNG and SVG)\n", summary.html.c_str(), summary.n_runs,
                    summary.n_figures);
    });
}

}  // namespace kascade::cli
