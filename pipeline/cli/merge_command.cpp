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
        "a newer kascade (newer schema) is refused; shards are only read. Every artifact file taken is verified\n"
        "against its shard's checksum first: one that is missing, damaged, or a different file already at its place\n"
        "in --into refuses the whole merge (each named; exit 1) and nothing is written, not even --into's database.\n"
        "Examples:\n"
        "  kascade merge /scratch/node1/results /scratch/node2/results --into results\n"
        "  kascade merge shards/3f2a9c0d1e4b5a67/job-* --into results");
    cmd->add_option("shards", args->shards, "results folders to merge from")->required()->check(CLI::ExistingDirectory);
    cmd->add_option("--into", args->into, "the results folder to merge into (default: --results)");
    cmd->callback([args, &common] {
        const std::filesystem::path into_dir = args->into.empty() ? common.results_dir : args->into;
        const std::vector<std::filesystem::path> shard_dirs(args->shards.begin(), args->shards.end());
        const ShardsMerge merged = merge_shards(shard_dirs, into_dir);
        // A file that cannot be taken refuses the merge: each is named, and nothing was written.
        for (const std::string& problem : merged.problems)
            std::fprintf(stderr, "kascade: error: %s\n", problem.c_str());
        KASCADE_CHECK(merged.problems.empty(),
                      "nothing merged into {}: {} artifact file{} of the shards {} missing, damaged or in the way "
                      "(listed above)",
                      into_dir.string(), merged.problems.size(), merged.problems.size() == 1 ? "" : "s",
                      merged.problems.size() == 1 ? "is" : "are");
        MergeCounts total;
        for (size_t i = 0; i < merged.counts.size(); ++i) {
            const MergeCounts& c = merged.counts[i];
            std::printf(
                "%s: %ld runs, %ld task runs (%ld samples), %ld schedules, %ld artifacts (%ld files), %ld benchmarks, "
                "%ld sweeps added; %ld already there%s\n",
                args->shards[i].c_str(), static_cast<long>(c.runs), static_cast<long>(c.task_runs),
                static_cast<long>(c.task_samples), static_cast<long>(c.schedules), static_cast<long>(c.artifacts),
                static_cast<long>(c.files), static_cast<long>(c.kernel_bench), static_cast<long>(c.sweeps),
                static_cast<long>(c.skipped),
                c.checksums > 0 ? fmt::format("; {} artifacts stored without a checksum got one", c.checksums).c_str()
                                : "");
            total.runs += c.runs;
            total.task_runs += c.task_runs;
            total.task_samples += c.task_samples;
            total.schedules += c.schedules;
            total.artifacts += c.artifacts;
        }
        std::printf(
            "merged %zu shards into %s: %ld runs, %ld task runs (%ld samples), %ld schedules, %ld artifacts "
            "added\n",
            merged.counts.size(), into_dir.c_str(), static_cast<long>(total.runs), static_cast<long>(total.task_runs),
            static_cast<long>(total.task_samples), static_cast<long>(total.schedules),
            static_cast<long>(total.artifacts));
    });
}

}  // namespace kascade::cli
