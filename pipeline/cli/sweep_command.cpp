// kascade sweep: run a grid of stage parameters from a TOML file, reusing every stored result.
#include <cstdio>

#include "io/error.h"
#include "io/store/table_format.h"
#include "pipeline/cli/commands.h"
#include "pipeline/report/report.h"
#include "pipeline/stages/sweep.h"

namespace kascade::cli {

namespace {
struct SweepArgs {
    std::string file;
    bool dry_run = false;
    bool no_report = false;
};
}  // namespace

void register_sweep_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<SweepArgs>();
    CLI::App* cmd = app.add_subcommand("sweep", "Run a grid of experiments from a TOML file (cached, resumable)");
    cmd->footer(
        "Ends with a table of the sweep's runs and writes their report (kascade report --sweep FILE) to\n"
        "<results>/reports/<file name>/index.html. Re-running the same file computes nothing new; a killed sweep\n"
        "resumes where it stopped. Format: README.md, section Sweeps.\n"
        "Examples:\n"
        "  kascade sweep experiments/stories260k-quick.toml\n"
        "  kascade sweep experiments/stories260k-quick.toml --dry-run");
    cmd->add_option("file", args->file, "sweep specification (.toml)")->required();
    cmd->add_flag("--dry-run", args->dry_run, "list the jobs and which are already stored; compute nothing");
    cmd->add_flag("--no-report", args->no_report, "do not write the HTML report of the sweep's runs");
    cmd->callback([args, &common] {
        const SweepSpec spec = load_sweep_spec(args->file);
        const SweepReport report = run_sweep(common.results_dir, spec, args->dry_run, stdout);
        if (args->dry_run || report.run_ids.empty()) return;
        std::string ids;
        for (int64_t id : report.run_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
        QueryDb db(std::filesystem::path(common.results_dir) / ResultsDb::kFileName);
        RunsQuery query;
        query.where = "id IN (" + ids + ")";
        std::printf("\n");
        std::fputs(format_result(query_runs(db, query), OutputFormat::Table).c_str(), stdout);
        if (args->no_report) return;
        // The runs are stored whatever happens here: a report that cannot be drawn is a warning, not a failure.
        try {
            const ReportSummary r = write_report({common.results_dir, query.where,
                                                  default_report_dir(common.results_dir, spec.file.stem().string()),
                                                  spec.file.filename().string()});
            std::printf("\nreport: %s\n", r.html.c_str());
        } catch (const Error& e) {
            std::fprintf(stderr, "kascade: warning: no report written: %s\n", e.what());
        }
    });
}

}  // namespace kascade::cli
