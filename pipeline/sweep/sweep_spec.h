// pipeline/sweep/sweep_spec.h: a sweep file (TOML) and the grid of stage jobs it expands to.
//
// Every key is checked: an unknown key or an out-of-range value is an error naming the file, the key and what was
// expected, raised before anything is computed or written; values are in the ranges of the command-line options
// (param_ranges.h), and a key left out gets the default of the stage's parameter struct (CaptureParams, TopKRule,
// ScheduleParams, EvalParams), which the command-line options show too. Paths may use ${VAR} (environment variables,
// e.g.
// ${KASCADE_ASSETS}) and are relative to the sweep file's folder. Format: README.md "Sweeps"; example:
// experiments/stories260k-quick.toml.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/modes.h"
#include "kernels/attention_types.h"
#include "pipeline/stages/dataset_task_stage.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/param_ranges.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/task_stage.h"

namespace kascade {

/// How `kascade sweep --slurm` asks for resources: table [slurm] of the sweep file, overridden by CLI options.
struct SlurmSettings {
    std::string partition;                 ///< empty: the cluster's default partition
    std::string time;                      ///< time limit per task, e.g. "04:00:00"; empty: the partition's
    int cpus_per_task = 0;                 ///< OpenMP threads per task; 0: Slurm's default (1)
    std::string mem;                       ///< memory per task, e.g. "32G"; empty: the cluster's default
    int array_throttle = 0;                ///< at most this many tasks of one array at once (%N); 0: no limit
    std::vector<std::string> sbatch_args;  ///< more sbatch arguments, one word each, e.g. "--account=abc"
};

/// The ranges of [slurm] cpus_per_task and array_throttle, shared with --cpus-per-task and --array-throttle.
inline constexpr ValueRange kCpusPerTaskRange{1, 4096};
inline constexpr ValueRange kArrayThrottleRange{1, 1 << 20};

/// Table [task]: long-context task jobs, one task run (over the whole lengths x depths x samples grid) per task x
/// prefill mode x method configuration of the sweep ([baselines] at each budget of [grid], and Kascade at each
/// schedule). Defaults: those of TaskParams.
struct SweepTaskSpec {
    std::vector<TaskKind> tasks;     ///< task.tasks (required)
    std::vector<int> lengths;        ///< task.lengths (required)
    std::vector<double> depths_pct;  ///< task.depths (a count, evenly spaced) or task.depth_pcts
    int samples = TaskParams{}.samples;
    uint64_t seed = TaskParams{}.seed;
    std::string haystack;               ///< task.haystack; empty: the filler sentences
    std::optional<int> max_new_tokens;  ///< empty: each task's default
    std::vector<TaskPrefill> prefills;  ///< task.prefill (default: TaskParams's)
    int batch = TaskParams{}.batch;     ///< task.batch: samples answered together (not part of the keys)

    /// The task run of `kind` this table describes, before a method is chosen (dense, the default prefill).
    TaskParams params(TaskKind kind) const;
};

/// Table [datasets]: dataset task jobs (kascade task --dataset), one task run per dataset x prefill mode x method
/// configuration, as [task]'s. The files are laid out as LongBench's: <dir>/<name>.jsonl. Defaults: those of
/// DatasetTaskParams, but max_length is required (a sweep plans its keys before loading the model).
struct SweepDatasetSpec {
    std::string dir;                 ///< datasets.dir (required)
    std::vector<std::string> names;  ///< datasets.names (required)
    std::string prompt_file;         ///< datasets.prompt_file; empty: each sample's `prompt`
    std::string maxlen_file;         ///< datasets.maxlen_file; empty: max_new_tokens is required
    std::optional<int> max_new_tokens;
    int max_length = 0;  ///< datasets.max_length (required)
    std::optional<LongBenchMetric> metric;
    std::optional<ChatTemplate> chat_template;  ///< datasets.chat_template; none: the tokenizer_config.json's
    std::optional<int> limit;
    std::vector<TaskPrefill> prefills;      ///< datasets.prefill (default: DatasetTaskParams's)
    int batch = DatasetTaskParams{}.batch;  ///< datasets.batch: samples answered together (not part of the keys)

    /// The run on dataset `name` this table describes, before a method is chosen (dense, the default prefill).
    DatasetTaskParams params(const std::string& name) const;
};

struct SweepSpec {
    std::filesystem::path file;
    std::string model;
    std::string tokenizer;  ///< empty: next to the model
    /// model.matmul: the matrix products' numerics of every eval and task run (captures are always exact)
    MatmulPrecision matmul = EvalParams{}.matmul;
    /// model.kv_dtype: the KV cache's element type of every eval and task run (captures are always fp32)
    KvDType kv_dtype = EvalParams{}.kv_dtype;
    std::string text;
    int64_t calib_offset = CaptureParams{}.token_offset;
    int64_t calib_tokens = CaptureParams{}.n_tokens;
    int64_t test_offset = -1;        ///< -1: right after the calibration range
    bool test_offset_given = false;  ///< test.offset is in the file (else it follows the calibration range)
    int64_t test_tokens = EvalParams{}.n_tokens;
    EvalPhase phase = EvalPhase::Prefill;  ///< test.phase
    int prompt_tokens = 0;                 ///< test.prompt_tokens (decode)
    int decode_tokens = 0;                 ///< test.decode_tokens (decode)
    int quest_page = 0;                    ///< baselines.quest_page
    /// baselines.omnikv_filter_layers and lessismore_selection_layers (each required with its method) and
    /// lessismore_window_ratio
    std::vector<int> omnikv_filter_layers;
    std::vector<int> lessismore_selection_layers;
    double lessismore_window_ratio = 0;
    std::vector<int> ctx;                      ///< grid.ctx (default: CaptureParams)
    std::vector<int> tile;                     ///< grid.tile (default: CaptureParams)
    std::vector<TopKRule> topk;                ///< from topk_tiles or topk_pct x k_min x k_rule; x round_k
    std::vector<KeyGranularity> granularity;   ///< grid.key_granularity (default [token], the paper)
    std::vector<Pooling> pooling;              ///< grid.pooling (default [post_softmax]; kascade and oracle runs)
    std::vector<ScheduleParams> schedules;     ///< fully expanded
    std::vector<int> schedule_tables;          ///< per schedule: i of the [[schedules]] table it came from
    std::vector<EvalMethod> baselines;         ///< dense, oracle, streaming; quest, omnikv, lessismore (decode)
    std::optional<SweepTaskSpec> task;         ///< [task]
    std::optional<SweepDatasetSpec> datasets;  ///< [datasets]
    bool perplexity = true;  ///< plan eval (perplexity) jobs: neither [task] nor [datasets], or a [test] table
    SlurmSettings slurm;
    /// The ${VAR}s the file uses, with their values: batch scripts set them, so tasks read the same paths.
    std::map<std::string, std::string> environment;
};

/// Reads and validates a sweep file.
SweepSpec load_sweep_spec(const std::filesystem::path& file);

}  // namespace kascade
