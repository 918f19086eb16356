// pipeline/sweep/sweep.h: running a sweep file's grid through the cached stages, in this process, in N local
// worker processes, or one job per process (a Slurm array task).
//
// The plan lists every job (capture per ctx x tile, similarity per top-k, schedule per policy setting, eval per
// schedule and baseline) with its content key and the jobs whose outputs it reads, computed before anything
// runs; the sweep's key is the hash of its job keys. A job whose key is stored is reused, so a second run of the
// same file computes nothing and a run killed at any point resumes where it stopped (every stage output is
// committed atomically: an HDF5 file renamed into place, then one DB transaction). Any number of processes may
// run the same or different sweeps on one results folder: a job another process finished first is a cache hit.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/similarity_stage.h"
#include "pipeline/sweep/sweep_spec.h"

namespace kascade {

struct SweepJob {
    std::string stage;            ///< capture | similarity | schedule | eval | task
    std::string label;            ///< its parameters, for the log
    std::string key;              ///< content key of its output
    std::vector<int> depends_on;  ///< indices of the jobs whose outputs it reads
    bool stored = false;          ///< already in the results folder when the plan was marked

    // What it runs with.
    CaptureParams capture;                               ///< capture
    std::string capture_key;                             ///< similarity: its input
    TopKRule topk;                                       ///< similarity
    KeyGranularity granularity = KeyGranularity::Token;  ///< similarity
    std::string similarity_key;                          ///< schedule: its input
    ScheduleParams schedule;                             ///< schedule
    std::string schedule_key;                            ///< eval kascade: its schedule
    EvalParams eval;  ///< eval (schedule_id is looked up by schedule_key when it runs)
    TaskParams task;  ///< task (its method's schedule_id is looked up by schedule_key when it runs)
    /// task on a dataset file ([datasets]; dataset.dataset is empty for the generated tasks of [task])
    DatasetTaskParams dataset;
    std::string task_grid;  ///< task: the samples it stores (task_grid_json / dataset_grid_json): what "stored" means
};

struct SweepPlan {
    std::string key;  ///< hash of the job keys in order: the sweep's identity on every machine
    std::filesystem::path model, tokenizer, text;
    std::vector<SweepJob> jobs;
};

/// Expands the grid into jobs (pure but for hashing the model, tokenizer and text files).
SweepPlan plan_sweep(const SweepSpec& spec);

/// Checks the sweep file's values that depend on its model and text, naming the file and the key: every grid.ctx
/// within the model's context, the calibration and test ranges within the text, a calibration range of at least
/// one window, and the layers the schedules name within the model's layers. Throws kascade::Error.
void check_sweep_inputs(const SweepSpec& spec, const LoadedModel& model, const LoadedText& text);

/// The same, loading the plan's model and text without a results folder (a dry run, a Slurm submission).
void check_sweep_inputs(const SweepSpec& spec, const SweepPlan& plan);

/// The grid a task job stores, as sweep_jobs.task_grid holds it: {"lengths": [...], "depths_pct": [...], "samples": N}.
std::string task_grid_json(const TaskParams& params);

/// The samples a dataset task job stores, as sweep_jobs.task_grid holds it: {"dataset_samples": N} (the first N
/// lines of its file).
std::string dataset_grid_json(int samples);

/// Whether a job's output is in the results folder of `db`: its run, its schedule, its artifact row with the file
/// in place (what the stages check before computing), or every sample of its task grid (task_grid_json; task jobs).
bool job_output_stored(ResultsDb& db, std::string_view stage, std::string_view key, std::string_view task_grid = {});

/// Sets SweepJob::stored from the results folder's database, read-only; a missing database means nothing stored.
void mark_stored(const std::filesystem::path& results_dir, SweepPlan& plan);

/// Records the sweep and its jobs (once per key) so `kascade status` can follow it.
void record_sweep(ResultsDb& db, const SweepSpec& spec, const SweepPlan& plan);

/// The folder of one job's shard: <shard_dir>/<sweep key>/job-<index>.
std::filesystem::path job_shard_dir(const std::filesystem::path& shard_dir, const SweepPlan& plan, int index);

struct SweepOptions {
    bool dry_run = false;             ///< list the jobs and which are stored; compute and write nothing
    int workers = 1;                  ///< --jobs N: N worker processes, the threads divided among them
    std::optional<int> job_index;     ///< --job-index I: run plan job I only (a Slurm array task)
    std::string expected_key;         ///< refuse to run if the plan's key differs (the file changed meanwhile)
    std::filesystem::path shard_dir;  ///< with job_index: write to the job's own shard folder, not the results
    bool worker = false;              ///< internal: be one of the --jobs workers (job indices on stdin)
    bool force = false;               ///< compute every job again, replacing what is stored (--force)
};

struct SweepReport {
    std::string key;
    std::vector<SweepJob> jobs;
    int computed = 0;
    int failed = 0;                        ///< jobs that ended with an error (and jobs that needed them)
    std::vector<int64_t> run_ids;          ///< the stored runs of this sweep, in plan order
    std::vector<int64_t> task_run_ids;     ///< the stored task runs on generated prompts, in plan order
    std::vector<int64_t> dataset_run_ids;  ///< the stored task runs on dataset files, in plan order
};

/// Makes the plan and runs it as `options` say, logging one line per job to `log`. Throws on the first failed
/// job when running in this process; with workers, failed jobs are counted and the others still run.
SweepReport run_sweep(const std::filesystem::path& results_dir, const SweepSpec& spec, const SweepOptions& options,
                      std::FILE* log);

// ---- Internals shared with sweep_workers.cpp ----

/// What running one job gave: computed or found stored, and a one-line summary of its result.
struct JobOutcome {
    bool cached = false;
    std::string summary;
};

/// Runs one job in `ws` (its inputs must be stored there); with force, computes it even if it is stored.
JobOutcome run_sweep_job(Workspace& ws, LoadedModel& model, LoadedText& text, const SweepJob& job, bool force);

/// The log line of a finished job.
std::string job_log_line(const SweepPlan& plan, int index, const JobOutcome& outcome, double seconds);

/// Records that a job failed (best effort: a failure to record is ignored, the job's error is what matters).
void record_job_failure(ResultsDb& db, const SweepPlan& plan, int index, const std::string& error);

/// Runs the plan's unstored jobs in `n_workers` processes of this executable (`kascade sweep FILE --worker`),
/// handing each the next job whose inputs are stored. Returns the number of computed and failed jobs.
struct WorkerTotals {
    int computed = 0;
    int failed = 0;
};
WorkerTotals run_with_workers(const std::filesystem::path& results_dir, const SweepSpec& spec, const SweepPlan& plan,
                              int n_workers, bool force, std::FILE* log);

/// The worker side: reads job indices from stdin, runs each, answers on stdout. Returns at end of input.
void serve_as_worker(const std::filesystem::path& results_dir, const SweepPlan& plan, bool force);

}  // namespace kascade
