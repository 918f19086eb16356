// pipeline/sweep/sweep_slurm.h: `kascade sweep FILE --slurm`: a sweep as Slurm job arrays.
//
// The jobs not yet stored are grouped by dependency level (level 0 reads nothing this submission makes, level n
// reads outputs of level n-1 at most) into one job array per level, whose task ids are the jobs' plan indices;
// each array waits for the previous one (afterany: a failed task does not cancel the rest, its dependents fail
// with a message naming it). Every task runs `kascade sweep FILE --job-index $SLURM_ARRAY_TASK_ID` into the
// shared results folder, or, with a shard folder, into its own shard, and a last job merges the shards. The
// batch scripts and task logs live in <results>/slurm/<sweep key>/; submitting again submits only what is
// still missing.
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pipeline/sweep/sweep.h"

namespace kascade {

struct SlurmSubmitOptions {
    SlurmSettings settings;
    std::filesystem::path shard_dir;  ///< empty: tasks write the results folder itself
    bool dry_run = false;             ///< write the scripts and print the sbatch commands; submit nothing
};

struct SlurmArrayJob {
    int level = 0;          ///< dependency level; the merge job is one level above the last array
    std::vector<int> jobs;  ///< plan indices = array task ids (empty for the merge job)
    std::filesystem::path script;
    std::string job_id;  ///< Slurm's job id (empty in a dry run)
};

struct SlurmSubmission {
    std::string sweep_key;
    std::filesystem::path folder;  ///< <results>/slurm/<sweep key>
    int stored = 0;                ///< jobs already stored: not submitted
    std::vector<SlurmArrayJob> arrays;
};

/// Plans the sweep, writes its batch scripts and submits them with sbatch (unless dry_run), printing the job ids
/// to `log`; records the submitted arrays in the results database. With a shard folder, the shards of an earlier
/// submission of the same sweep are merged into the results first, so only what they lack is submitted again.
SlurmSubmission submit_sweep_to_slurm(const std::filesystem::path& results_dir, const SweepSpec& spec,
                                      const SlurmSubmitOptions& options, std::FILE* log);

/// "0-3,7,9-11": Slurm's --array list of sorted, distinct task ids.
std::string slurm_array_ranges(const std::vector<int>& ids);

/// What Slurm says about the tasks of some array jobs.
struct SlurmTaskStates {
    /// The controller answered for every array: a submitted task it does not list as queued or running has
    /// ended (a task cancelled while pending leaves no trace where accounting is off).
    bool queue_known = false;
    /// "<array id>_<task id>" -> "PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED", ...: queued, running
    /// and recently ended tasks from squeue, older ones from sacct where accounting is on.
    std::map<std::string, std::string> states;
};

SlurmTaskStates slurm_task_states(const std::vector<std::string>& array_job_ids);

}  // namespace kascade
