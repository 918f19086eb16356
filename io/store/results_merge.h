// io/store/results_merge.h: copying the results of one results folder into another (`kascade merge`, and the
// inputs a sharded Slurm task imports before it runs).
//
// Rows are matched by their content keys (models and texts by hash, artifacts, schedules, runs and task runs by key,
// task samples by their run and (length, depth, index), sweeps
// by key, failures and Slurm arrays by their unique columns, kernel benchmarks by all their values), so merging
// the same source twice, or two sources that share results, never duplicates a row: what the destination has is
// kept, what it lacks is added with its ids renumbered. Artifact files are copied (or hard-linked) under a partial
// name and renamed into place before their rows are written, and all rows go in one transaction.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "io/store/results_db.h"

namespace kascade {

/// Rows (and artifact files) a merge added to the destination.
struct MergeCounts {
    std::int64_t artifacts = 0;
    std::int64_t files = 0;  ///< artifact files copied or linked
    std::int64_t schedules = 0;
    std::int64_t runs = 0;
    std::int64_t task_runs = 0;
    std::int64_t task_samples = 0;  ///< also those added to a task run the destination had
    std::int64_t kernel_bench = 0;
    std::int64_t sweeps = 0;
    std::int64_t job_failures = 0;
    std::int64_t slurm_arrays = 0;
    std::int64_t skipped = 0;  ///< artifacts, schedules, runs and task runs the destination had already
};

/// Adds to `dest` what `source` has and dest lacks. keys == nullptr: everything. Otherwise only the artifacts,
/// schedules, runs and task runs whose key is in *keys, with everything they are derived from (a run's schedule, a
/// schedule's similarity, a similarity's capture) and the models and texts they refer to. An artifact whose file
/// is missing in the source keeps its row (so its dependents stay valid) but no file, which makes it "not stored".
/// Throws kascade::Error naming both databases on a failure; nothing is then written to dest's database.
MergeCounts merge_results(ResultsDb& source, ResultsDb& dest, const std::set<std::string>* keys = nullptr);

}  // namespace kascade
