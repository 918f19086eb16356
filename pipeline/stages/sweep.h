// pipeline/stages/sweep.h: running a sweep file's grid through the cached stages.
//
// The plan lists every job (capture per ctx x tile, similarity per top-k, schedule per policy setting, eval per
// schedule and baseline) with its content key, computed before anything runs; a job whose key is stored is
// reused, so a second run of the same file computes nothing and a run killed at any point resumes where it stopped
// (every stage output is committed atomically: an HDF5 file renamed into place, then one DB transaction).
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/stages/sweep_spec.h"

namespace kascade {

struct SweepJob {
    std::string stage;    ///< capture | similarity | schedule | eval
    std::string label;    ///< its parameters, for the log
    std::string key;      ///< content key
    bool stored = false;  ///< already in the results database when the plan was made
};

struct SweepReport {
    std::vector<SweepJob> jobs;
    int computed = 0;
    std::vector<int64_t> run_ids;  ///< the runs of this sweep, in plan order
};

/// Makes the plan and, unless dry_run, runs it, logging one line per job to `log`.
SweepReport run_sweep(const std::filesystem::path& results_dir, const SweepSpec& spec, bool dry_run, std::FILE* log);

}  // namespace kascade
