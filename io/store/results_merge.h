// io/store/results_merge.h: copying the results of one results folder into another (`kascade merge`, and the
// inputs a sharded Slurm task imports before it runs).
//
// Rows are matched by their content keys (models and texts by hash, artifacts, schedules, runs and task runs by key,
// task samples by their run and (length, depth, index), sweeps
// by key, failures and Slurm arrays by their unique columns, kernel benchmarks by all their values), so merging
// the same source twice, or two sources that share results, never duplicates a row: what the destination has is
// kept, what it lacks is added with its ids renumbered.
//
// A merge trusts no file it copies. Every artifact it takes is verified first: its row's path must be
// artifacts/<stage>/<key>.h5, its file must be in the source and hash to the row's checksum (a row stored before
// checksums: its size and root attributes must match the row, and the destination row gets the checksum), and a
// file already at the destination path must be that same file. One missing, damaged or foreign file refuses the
// whole merge before anything is written, naming every such file. Files are then copied (or hard-linked) under a
// partial name, renamed into place and hashed again before their rows are written, and all rows go in one
// transaction: a destination row always has its verified file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "io/store/results_db.h"

namespace kascade {

/// Rows (and artifact files) a merge added to the destination.
struct MergeCounts {
    std::int64_t artifacts = 0;
    std::int64_t files = 0;  ///< artifact files copied or linked
    std::int64_t schedules = 0;
    std::int64_t runs = 0;
    std::int64_t task_runs = 0;
    std::int64_t task_samples = 0;  ///< task and dataset samples, also those added to a task run the destination had
    std::int64_t kernel_bench = 0;
    std::int64_t sweeps = 0;
    std::int64_t job_failures = 0;
    std::int64_t slurm_arrays = 0;
    std::int64_t skipped = 0;    ///< artifacts, schedules, runs and task runs the destination had already
    std::int64_t checksums = 0;  ///< artifacts added that their source stored without a checksum (now with one)
};

/// Why the artifact files that merging `source` into the results folder `dest_dir` would take cannot be taken, one
/// line per file ("<file>: missing in the shard ...", "<file>: damaged: ...", "<file>: already exists and is not
/// ..."); empty when every one verifies. Writes nothing and hashes every file it would take. `dest` is the
/// destination's database, or nullptr where it has none yet. `taken` holds the keys of artifacts that earlier
/// sources of the same merge provide (not taken again from this one); this source's are added to it. keys as for
/// merge_results.
std::vector<std::string> check_merge_files(ResultsDb& source, const std::filesystem::path& dest_dir, ResultsDb* dest,
                                           std::set<std::string>& taken, const std::set<std::string>* keys = nullptr);

/// Adds to `dest` what `source` has and dest lacks. keys == nullptr: everything. Otherwise only the artifacts,
/// schedules, runs and task runs whose key is in *keys, with everything they are derived from (a run's schedule, a
/// schedule's similarity, a similarity's capture) and the models and texts they refer to. Every artifact file
/// taken is verified (check_merge_files); a dest row whose file is gone gets the source's file back where it
/// verifies. Throws kascade::Error naming both databases and every file that cannot be taken, or a source whose
/// rows refer to rows it lacks; nothing is then written to dest (no row, no file).
MergeCounts merge_results(ResultsDb& source, ResultsDb& dest, const std::set<std::string>* keys = nullptr);

/// What `kascade merge` did: per shard, the rows it added; or, where a file cannot be taken, every such file and
/// nothing else (counts empty).
struct ShardsMerge {
    std::vector<MergeCounts> counts;    ///< one per shard, in order
    std::vector<std::string> problems;  ///< check_merge_files over all shards; non-empty: nothing was written
};

/// `kascade merge SHARD... --into DIR`: opens every shard (each must hold a results database) and checks every
/// artifact file each would add before anything is written; with a problem, returns them and creates nothing (not
/// the folder, not its database). Then merges the shards in order. Throws kascade::Error for a shard that is not a
/// results folder or is newer than this kascade, and for a failure while writing (a database this call created is
/// then removed while it is still empty).
ShardsMerge merge_shards(const std::vector<std::filesystem::path>& shards, const std::filesystem::path& into_dir);

}  // namespace kascade
