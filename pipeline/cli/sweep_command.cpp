// kascade sweep: run a grid of stage parameters from a TOML file, reusing every stored result; in this process,
// in N local worker processes, or as Slurm job arrays.
#include <cstdio>

#include "base/error.h"
#include "io/store/table_format.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/cli/output_guard.h"
#include "pipeline/report/report.h"
#include "pipeline/sweep/sweep.h"
#include "pipeline/sweep/sweep_slurm.h"

namespace kascade::cli {

namespace {
struct SweepArgs {
    std::string file;
    bool dry_run = false;
    int jobs = 1;
    int job_index = -1;
    std::string sweep_key;
    std::string shard_dir;
    bool worker = false;
    bool force = false;
    bool slurm = false;
    std::string partition, time, mem;
    int cpus_per_task = 0;
    int array_throttle = 0;
    std::vector<std::string> sbatch_args;
    bool no_report = false;
};

/// The SQL condition selecting rows whose `column` is one of `ids` ("" when there are none).
std::string ids_condition(const std::string& column, const std::vector<int64_t>& ids) {
    if (ids.empty()) return "";
    std::string list;
    for (int64_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
    return column + " IN (" + list + ")";
}

/// The sweep's runs (perplexity) and task runs (mean score per length, or per dataset), as `kascade query runs` /
/// `query tasks` / `query datasets`.
void print_result_tables(const std::string& results_dir, const SweepReport& report) {
    if (report.run_ids.empty() && report.task_run_ids.empty() && report.dataset_run_ids.empty()) return;
    QueryDb db(std::filesystem::path(results_dir) / ResultsDb::kFileName);
    if (!report.run_ids.empty()) {
        RunsQuery query;
        query.where = ids_condition("id", report.run_ids);
        std::printf("\n");
        write_result(stdout, query_runs(db, query), OutputFormat::Table);
    }
    if (!report.task_run_ids.empty()) {
        std::printf("\n");
        write_result(stdout, query_task_scores(db, ids_condition("task_run_id", report.task_run_ids), false),
                     OutputFormat::Table);
    }
    if (!report.dataset_run_ids.empty()) {
        std::printf("\n");
        write_result(stdout, query_dataset_scores(db, ids_condition("task_run_id", report.dataset_run_ids)),
                     OutputFormat::Table);
    }
}

/// The runs are stored whatever happens here: a report that cannot be drawn is a warning, not a failure.
void write_sweep_report(const std::string& results_dir, const SweepSpec& spec, const SweepReport& report) {
    if (report.run_ids.empty() && report.task_run_ids.empty() && report.dataset_run_ids.empty()) return;
    try {
        ReportOptions options;
        options.results_dir = results_dir;
        options.selection = {ids_condition("id", report.run_ids), ids_condition("task_run_id", report.task_run_ids),
                             ids_condition("task_run_id", report.dataset_run_ids)};
        options.out_dir = default_report_dir(results_dir, spec.file.stem().string());
        options.title = spec.file.filename().string();
        check_may_replace_report(
            options.out_dir, fmt::format("report folder \"{}\"", options.out_dir.string()),
            fmt::format("run `kascade report --sweep {} --results {} --force`", spec.file.string(), results_dir),
            false);
        const ReportSummary r = write_report(options);
        std::printf("\nreport: %s\n", r.html.c_str());
    } catch (const std::exception& e) {  // kascade's errors, and file system failures no check anticipated
        std::fprintf(stderr, "kascade: warning: no report written: %s\n", e.what());
    }
}
}  // namespace

void register_sweep_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<SweepArgs>();
    CLI::App* cmd = app.add_subcommand("sweep", "Run a grid of experiments from a TOML file (cached, resumable)");
    cmd->footer(
        "Ends with tables of the sweep's runs and task runs. Re-running the same file computes nothing new; a killed "
        "sweep\n"
        "resumes where it stopped; any number of kascade processes may share one results folder.\n"
        "Format: README.md, sections Sweeps and Running on a cluster. The runs' report (kascade report --sweep\n"
        "FILE) goes to <results>/reports/<file name>/index.html.\n"
        "Examples:\n"
        "  kascade sweep experiments/stories260k-quick.toml\n"
        "  kascade sweep experiments/stories260k-quick.toml --dry-run\n"
        "  kascade sweep experiments/stories260k-quick.toml --jobs 2\n"
        "  kascade sweep experiments/stories260k-quick.toml --slurm --partition cpu --time 02:00:00 --cpus-per-task 8\n"
        "  kascade sweep experiments/stories260k-quick.toml --slurm --shard-dir /local/scratch/kascade-shards");
    cmd->add_option("file", args->file, "sweep specification (.toml)")->required();
    cmd->add_flag("--dry-run", args->dry_run,
                  "list the jobs and which are already stored; compute nothing (with --slurm: write the batch "
                  "scripts, submit nothing)");
    check_range(cmd->add_option("--jobs,-j", args->jobs,
                                "worker processes, each taking the next job whose inputs exist; the "
                                "OpenMP threads are divided among them"),
                1, 1024);
    check_range(cmd->add_option("--job-index", args->job_index,
                                "run only this job of the plan (its index, as a Slurm array task id); its inputs must "
                                "be stored"),
                0, std::numeric_limits<int>::max());
    cmd->add_option("--sweep-key", args->sweep_key,
                    "refuse to run unless the plan's key is this one (the sweep as it was submitted)");
    cmd->add_option("--shard-dir", args->shard_dir,
                    "with --job-index or --slurm: each job writes its own results folder <DIR>/<sweep key>/job-<i> "
                    "(for file systems where SQLite cannot be shared), merged into --results at the end");
    cmd->add_flag("--no-report", args->no_report, "do not write the HTML report of the sweep's runs");
    cmd->add_flag("--force", args->force, "compute every job again, replacing what is stored (not with --slurm)");
    cmd->add_flag("--worker", args->worker, "internal: serve as a --jobs worker")->group("");
    cmd->add_flag("--slurm", args->slurm,
                  "submit the jobs not yet stored as Slurm job arrays with dependencies, one per level; the scripts "
                  "and logs go to <results>/slurm/<sweep key>/");
    cmd->add_option("--partition", args->partition, "Slurm partition (default: [slurm] partition, else the cluster's)");
    cmd->add_option("--time", args->time, "Slurm time limit per task, e.g. 04:00:00 (default: [slurm] time)");
    check_range(
        cmd->add_option("--cpus-per-task", args->cpus_per_task, "CPUs = OpenMP threads per task (default: [slurm])"),
        kCpusPerTaskRange);
    cmd->add_option("--mem", args->mem, "memory per task, e.g. 32G (default: [slurm] mem)");
    check_range(cmd->add_option("--array-throttle", args->array_throttle,
                                "run at most N tasks of an array at once (sbatch --array=...%N)"),
                kArrayThrottleRange);
    cmd->add_option("--sbatch-arg", args->sbatch_args,
                    "one more sbatch argument, e.g. --sbatch-arg=--account=abc (repeatable; adds to [slurm] "
                    "sbatch_args)");
    cmd->callback([args, &common] {
        SweepSpec spec = load_sweep_spec(args->file);
        if (args->slurm) {
            KASCADE_USAGE_CHECK(args->job_index < 0 && args->jobs == 1 && !args->force,
                                "--slurm cannot be combined with --job-index, --jobs or --force");
            SlurmSubmitOptions options;
            options.settings = spec.slurm;
            if (!args->partition.empty()) options.settings.partition = args->partition;
            if (!args->time.empty()) options.settings.time = args->time;
            if (!args->mem.empty()) options.settings.mem = args->mem;
            if (args->cpus_per_task > 0) options.settings.cpus_per_task = args->cpus_per_task;
            if (args->array_throttle > 0) options.settings.array_throttle = args->array_throttle;
            for (const std::string& a : args->sbatch_args) options.settings.sbatch_args.push_back(a);
            options.shard_dir = args->shard_dir;
            options.dry_run = args->dry_run;
            submit_sweep_to_slurm(common.results_dir, spec, options, stdout);
            return;
        }
        KASCADE_USAGE_CHECK(args->shard_dir.empty() || args->job_index >= 0 || args->worker,
                            "--shard-dir needs --job-index or --slurm");
        SweepOptions options;
        options.dry_run = args->dry_run;
        options.workers = args->jobs;
        if (args->job_index >= 0) options.job_index = args->job_index;
        options.expected_key = args->sweep_key;
        options.shard_dir = args->shard_dir;
        options.worker = args->worker;
        options.force = args->force;
        const SweepReport report = run_sweep(common.results_dir, spec, options, stdout);
        if (!args->dry_run && !args->worker && !options.job_index) {
            print_result_tables(common.results_dir, report);
            if (!args->no_report) write_sweep_report(common.results_dir, spec, report);
        }
        KASCADE_CHECK(report.failed == 0, "{} of the sweep's jobs failed (see above); run it again to retry them",
                      report.failed);
    });
}

}  // namespace kascade::cli
