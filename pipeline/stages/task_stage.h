// pipeline/stages/task_stage.h: long-context task evaluation. Samples of a task (pipeline/tasks/) are generated
// at exact lengths and needle depths, answered greedily under an attention method (the prompt prefilled with the
// method, or densely: the decode-only ablation; Quest always prefills densely, as in its paper) and scored; each
// sample is stored as it finishes (task_samples), so a killed run resumes at the next sample and several processes
// on one results folder store the rows one serial run would.
//
// Like eval, a run is resolve (defaults, checks, the content key), then measure + record per sample.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pipeline/runtime/greedy_generation.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/workspace.h"
#include "pipeline/tasks/task_kind.h"
#include "pipeline/tasks/task_prompt.h"

namespace kascade {

inline constexpr int kTaskFormatVersion = 1;

/// What to evaluate. The defaults here are the ones the CLI shows and uses.
struct TaskParams {
    TaskKind task = TaskKind::Passkey;
    uint64_t seed = 0;
    std::vector<int> lengths{1024};      ///< prompt tokens, BOS included
    std::vector<double> depths_pct{50};  ///< where the asked needle goes, % of the haystack
    int samples = 1;                     ///< per (length, depth)
    std::filesystem::path haystack;      ///< a text file; empty: the classic filler sentences
    std::optional<int> max_new_tokens;   ///< default: the task's (task_defaults)
    TaskPrefill prefill = TaskPrefill::Sparse;
    /// Samples answered together, their decode steps in one batched forward pass. Not part of the run's key: the
    /// answers are the same at every batch size; the decode tokens/s per sample and its batch column are not.
    int batch = 1;
    /// The method and its budget: method, schedule_id, topk, tile, granularity, pooling, quest_page,
    /// selection_layers, window_ratio, and the numerics matmul and kv_dtype (the rest of EvalParams is not used).
    EvalParams method;
};

/// What a task run's content key is made of (pure: a sweep plans task jobs with it before anything runs).
struct TaskKeyInputs {
    std::string model_hash, tokenizer_hash;
    std::string haystack_hash;  ///< empty: the filler sentences
    TaskKind task = TaskKind::Passkey;
    uint64_t seed = 0;
    int max_new_tokens = 0;
    TaskPrefill prefill = TaskPrefill::Sparse;  ///< as effective_task_prefill gives it
    MethodKeyInputs method_key;
};
std::string task_key(const TaskKeyInputs& inputs);

/// The prefill a method's task run uses: Quest, OmniKV and LessIsMore select only at decode time, so their prompt is
/// prefilled densely as in their papers, and dense attention is the same computation either way (one prefill mode,
/// one key).
TaskPrefill effective_task_prefill(EvalMethod method, TaskPrefill requested);

/// Whether every sample of the grid (lengths x depths x samples) of the task run `key` is stored.
bool task_grid_stored(ResultsDb& db, std::string_view key, const std::vector<int>& lengths,
                      const std::vector<double>& depths_pct, int samples);

/// `n` depths evenly spaced over 0-100 % (n = 1: 50 %).
std::vector<double> evenly_spaced_depths(int n);

struct ResolvedTask {
    TaskParams params;
    ResolvedEval method;  ///< the method with its defaults filled in (from the schedule, for kascade)
    TaskMetric metric = TaskMetric::NumberMatch;
    int max_new_tokens = 0;
    std::string haystack_hash;                ///< empty: the filler
    std::optional<TextRecord> haystack_text;  ///< the haystack file's texts row (stored with the run); none: the filler
    std::vector<std::string> haystack;        ///< its sentences
    std::string key;
};

/// Step 1: defaults, checks (an error names the option, value and expectation), the content key. Reads the
/// haystack and, for method kascade, the schedule from `db` (may be null for the other methods); computes nothing.
ResolvedTask resolve_task(ResultsDb* db, const LoadedModel& model, const TaskParams& params);

/// One sample of a resolved task, as measure and record see it (for showing a prompt without running it).
TaskSample make_resolved_task_sample(const ResolvedTask& r, const LoadedModel& model, int length, double depth,
                                     int index);

/// One prompt of a batch answered under a method: the greedy answer, the method's density over its passes (1 for
/// dense) and the speed columns every sample row stores.
struct AnsweredPrompt {
    GreedyResult answer;
    double density = 1;
    std::optional<double> prefill_tokens_per_s;
    std::optional<double> decode_tokens_per_s;  ///< none when the answer took one token (no decode step)
};

/// Answers the prompts together (generate_greedy_batch), each under its own policy of the resolved method, the prompt
/// prefilled through it or densely: the measurement of the task and dataset stages.
std::vector<AnsweredPrompt> answer_prompts(const Transformer& runtime, const LoadedModel& model,
                                           const ResolvedEval& method, TaskPrefill prefill,
                                           std::span<const std::vector<int32_t>> prompts, const GreedyOptions& options);

/// Mean score per length over the requested grid, and overall.
struct TaskSummary {
    int64_t task_run_id = 0;
    int samples_run = 0;     ///< computed by this call
    int samples_stored = 0;  ///< of the grid, found stored already
    double score = 0;
    std::map<int, double> by_length;
    double density = 0;  ///< mean over the grid's samples
};

/// Steps 2 and 3 for every sample of the grid not stored yet (with force: for every sample, replacing the stored
/// ones), params.batch samples at a time, each batch stored as it finishes; then the summary of the whole grid.
/// progress (may be empty) is called after each batch with (samples done, total).
TaskSummary run_task(Workspace& ws, LoadedModel& model, const TaskParams& params,
                     const std::function<void(int, int)>& progress = {}, bool force = false);

}  // namespace kascade
