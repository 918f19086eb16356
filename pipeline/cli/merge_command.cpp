// kascade merge: copy the results of shard folders (another machine's, or the per-task shards of a Slurm sweep)
// into one results folder. Idempotent: rows are matched by content key, so merging again adds nothing.
#include <cstdio>

#include "base/error.h"
#include "io/store/results_merge.h"
#include "pipeline/cli/commands.h"

namespace kascade::cli {

namespace {
struct MergeArgs {
    std::vector<std::string> shards;
    std::string into;
};
}  // namespace

void register_merge_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<MergeArgs>();
    CLI::App* cmd = app.add_subcommand("merge", "Merge results folders (shards) into one, by content key");
    cmd->footer(
        "Adds to --into every artifact, schedule, run, task run and sample, benchmark and sweep record a shard has\n"
        "and --into lacks;\n"
        "artifact files are copied (or hard-linked) atomically. Running it again changes nothing. A shard made by\n"
        "a newer kascade (newer schema) is refused; shards are only read.\n"
        "Examples:\n"
        "  kascade merge /scratch/node1/results /scratch/node2/results --into results\n"
        "  kascade merge shards/3f2a9c0d1e4b5a67/job-* --into results");
    cmd->add_option("shards", args->shards, "results folders to merge from")->required()->check(CLI::ExistingDirectory);
    cmd->add_option("--into", args->into, "the results folder to merge into (default: --results)");
    cmd->callback([args, &common] {
        const std::filesystem::path into_dir = args->into.empty() ? common.results_dir : args->into;
        // Every shard is opened (and its schema checked) before anything is written.
        std::vector<std::unique_ptr<ResultsDb>> shards;
        for (const std::string& shard : args->shards) {
            KASCADE_CHECK(std::filesystem::exists(std::filesystem::path(shard) / ResultsDb::kFileName),
                          "shard \"{}\" has no {}: not a results folder", shard, ResultsDb::kFileName);
            shards.push_back(std::make_unique<ResultsDb>(shard, DbAccess::ReadOnly));
        }
        ResultsDb into(into_dir);
        MergeCounts total;
        for (size_t i = 0; i < shards.size(); ++i) {
            const MergeCounts c = merge_results(*shards[i], into);
            std::printf(
                "%s: %ld runs, %ld task runs (%ld samples), %ld schedules, %ld artifacts (%ld files), %ld benchmarks, "
                "%ld sweeps added; %ld already there\n",
                args->shards[i].c_str(), static_cast<long>(c.runs), static_cast<long>(c.task_runs),
                static_cast<long>(c.task_samples), static_cast<long>(c.schedules), static_cast<long>(c.artifacts),
                static_cast<long>(c.files), static_cast<long>(c.kernel_bench), static_cast<long>(c.sweeps),
                static_cast<long>(c.skipped));
            total.runs += c.runs;
            total.task_runs += c.task_runs;
            total.task_samples += c.task_samples;
            total.schedules += c.schedules;
            total.artifacts += c.artifacts;
        }
        std::printf(
            "merged %zu shards into %s: %ld runs, %ld task runs (%ld samples), %ld schedules, %ld artifacts "
            "added\n",
            shards.size(), into_dir.c_str(), static_cast<long>(total.runs), static_cast<long>(total.task_runs),
            static_cast<long>(total.task_samples), static_cast<long>(total.schedules),
            static_cast<long>(total.artifacts));
    });
}

}  // namespace kascade::cli
