// kascade report: an HTML page with PNG/SVG figures (drawn by gnuplot) of the runs and long-context task runs in the
// results database.
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/output_guard.h"
#include "pipeline/report/report.h"
#include "pipeline/sweep/sweep.h"

namespace kascade::cli {

namespace fs = std::filesystem;

namespace {
struct ReportArgs {
    std::string where;
    std::string task_where;
    std::string dataset_where;
    std::string sweep;
    std::string out;
    bool force = false;
};

/// What a sweep file asks for (what of it is stored), as conditions on content keys: its evals' runs (runs_flat
/// run_key), its task jobs' task runs (task_samples_flat task_run_key) and its dataset jobs' (dataset_samples_flat
/// task_run_key), every stored sample of them. A sweep with task jobs and no evals selects task runs only, so that
/// its report is not refused for having no run.
ReportSelection sweep_selection(const std::string& results_dir, const SweepSpec& spec) {
    std::FILE* quiet = std::fopen("/dev/null", "w");
    KASCADE_CHECK(quiet != nullptr, "cannot open /dev/null");
    std::vector<std::string> run_keys, task_keys, dataset_keys;
    try {
        SweepOptions options;
        options.dry_run = true;
        for (const SweepJob& job : run_sweep(results_dir, spec, options, quiet).jobs) {
            const std::string key = "'" + job.key + "'";
            if (job.stage == "eval") run_keys.push_back(key);
            if (job.stage == "task") (job.dataset.dataset.empty() ? task_keys : dataset_keys).push_back(key);
        }
    } catch (...) {
        std::fclose(quiet);
        throw;
    }
    std::fclose(quiet);
    const auto key_condition = [](const char* column, const std::vector<std::string>& keys) {
        return fmt::format("{} IN ({})", column, fmt::join(keys, ", "));
    };
    ReportSelection selection;
    if (!run_keys.empty() || (task_keys.empty() && dataset_keys.empty()))
        selection.where = key_condition("run_key", run_keys);
    if (!task_keys.empty()) selection.task_where = key_condition("task_run_key", task_keys);
    if (!dataset_keys.empty()) selection.dataset_where = key_condition("task_run_key", dataset_keys);
    return selection;
}
}  // namespace

void register_report_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<ReportArgs>();
    CLI::App* cmd = app.add_subcommand(
        "report", "Write an HTML report with figures (PNG and SVG, drawn by gnuplot) of stored runs and task runs");
    cmd->footer(
        "Figures: degradation vs density with Pareto fronts, perplexity vs top-k, layer similarity heatmaps and\n"
        "importance, schedule diagrams and head maps, per-layer density and error of each run, kernel speed-ups;\n"
        "for long-context task runs, needle heatmaps (score by depth x length) and score vs density; for runs on\n"
        "dataset files, the score of each configuration on each dataset.\n"
        "Selection: --where picks runs, --task-where task samples, --dataset-where dataset samples; giving one\n"
        "leaves the other kinds out, giving none shows everything. Needs gnuplot (Debian package gnuplot-nox). The "
        "folder is replaced only when\n"
        "the new report is complete.\n"
        "Examples:\n"
        "  kascade report                                              # everything -> results/report/index.html\n"
        "  kascade report --sweep experiments/stories260k-quick.toml   # -> results/reports/stories260k-quick/\n"
        "  kascade report --where \"ctx = 512 AND method != 'streaming'\" --out /tmp/ctx512\n"
        "  kascade report --task-where \"task = 'passkey' AND length <= 4096\" --out /tmp/passkey\n"
        "  kascade report --dataset-where \"dataset_name IN ('hotpotqa', 'qasper')\" --out /tmp/longbench");
    auto* where = cmd->add_option("--where", args->where, "SQL condition on runs_flat columns selecting the runs");
    auto* task_where =
        cmd->add_option("--task-where", args->task_where,
                        "SQL condition on task_samples_flat columns selecting the task samples (as `kascade query "
                        "tasks --where`)");
    auto* dataset_where = cmd->add_option("--dataset-where", args->dataset_where,
                                          "SQL condition on dataset_samples_flat columns selecting the samples of task "
                                          "runs on dataset files (as `kascade query datasets --where`)");
    auto* sweep =
        cmd->add_option("--sweep", args->sweep, "the runs and task runs of this sweep file (those already stored)");
    where->excludes(sweep);
    task_where->excludes(sweep);
    dataset_where->excludes(sweep);
    cmd->add_option("--out", args->out,
                    "report folder (default: <results>/report, or <results>/reports/<sweep name> with --sweep)");
    cmd->add_flag("--force", args->force,
                  "replace the report folder even if it holds files kascade report did not write (they are deleted)");
    cmd->callback([args, &common] {
        ReportOptions options;
        options.results_dir = common.results_dir;
        options.selection = {args->where, args->task_where, args->dataset_where};
        std::string name;
        if (!args->sweep.empty()) {
            const SweepSpec spec = load_sweep_spec(args->sweep);
            options.selection = sweep_selection(common.results_dir, spec);
            name = spec.file.stem().string();
            options.title = spec.file.filename().string();
        }
        options.out_dir = args->out.empty() ? default_report_dir(common.results_dir, name) : fs::path(args->out);
        const fs::path folder = options.out_dir.lexically_normal();
        check_may_replace_report(
            folder.has_filename() ? folder : folder.parent_path(),
            fmt::format("{} \"{}\"", args->out.empty() ? "report folder" : "--out", options.out_dir.string()),
            "pass --force", args->force);
        const ReportSummary summary = write_report(options);
        std::printf("report: %s (%d runs, %d task runs, %d dataset runs, %d figures as PNG and SVG)\n",
                    summary.html.c_str(), summary.n_runs, summary.n_task_runs, summary.n_dataset_runs,
                    summary.n_figures);
    });
}

}  // namespace kascade::cli
