// pipeline/stages/dataset_task_stage.h: task evaluation on a dataset file (LongBench's JSONL layout, or any JSONL
// with `prompt` and `answers`). Each sample's prompt is made from the dataset's template, put through the model's
// chat template, tokenized, cut in the middle to the requested length (pipeline/tasks/dataset_prompt.h), answered
// greedily under an attention method and scored by the dataset's LongBench metric. Samples are stored one by one as
// they finish (dataset_samples), so a killed run resumes at the next sample and several processes on one results
// folder store the rows one serial run would; the run itself is a task_runs row with task "dataset".
//
// Like the other stages: resolve (every file read and checked, defaults, the content key), then measure + record
// per sample.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/task_stage.h"
#include "pipeline/stages/workspace.h"
#include "pipeline/tasks/chat_template.h"
#include "pipeline/tasks/dataset_file.h"
#include "pipeline/tasks/dataset_prompt.h"
#include "pipeline/tasks/longbench_metrics.h"
#include "pipeline/tasks/task_kind.h"

namespace kascade {

/// What to evaluate. The defaults here are the ones the CLI shows and uses.
struct DatasetTaskParams {
    std::filesystem::path dataset;              ///< the JSONL file
    std::string dataset_name;                   ///< picks the metric, template and answer length (LongBench's names)
    std::filesystem::path prompt_file;          ///< dataset2prompt.json; empty: each sample's `prompt` field
    std::filesystem::path maxlen_file;          ///< dataset2maxlen.json; empty: max_new_tokens must be given
    std::optional<int> max_new_tokens;          ///< overrides the maxlen file
    std::optional<int> max_length;              ///< prompt tokens at most (BOS included); default: the model's context
                                                ///< less max_new_tokens
    std::optional<LongBenchMetric> metric;      ///< default: the LongBench dataset's (an error for another name)
    std::optional<ChatTemplate> chat_template;  ///< none given: the one tokenizer_config.json names
    std::optional<int> limit;                   ///< only the first N samples of the file
    TaskPrefill prefill = TaskPrefill::Sparse;
    int batch = TaskParams{}.batch;  ///< samples answered together, as TaskParams::batch (not part of the key)
    /// The method and its budget, as TaskParams::method.
    EvalParams method;
};

/// What a dataset run's files say, read and checked without the model's weights (a sweep plans with it): the
/// scoring rule, the answer length, the prompt template, the samples (formatted once, so that a template naming a
/// field some sample lacks is refused before anything runs) and the chat template of the tokenizer's
/// tokenizer_config.json (or the one named).
struct DatasetRunFiles {
    LongBenchDataset scoring;  ///< the metric and first-line rule (a named metric on a dataset of another name)
    int max_new_tokens = 0;
    std::string prompt_template;                      ///< empty: the samples' `prompt` fields
    std::vector<DatasetSample> samples;               ///< the first `limit` of the file
    TextRecord dataset_text;                          ///< the dataset file's texts row (stored with the run)
    ChatTemplate chat_template = ChatTemplate::None;  ///< None also for LongBench's datasets given as is
    ChatSpecialTokens chat_tokens;                    ///< the BOS and EOS strings the template writes
};
DatasetRunFiles read_dataset_run_files(const DatasetTaskParams& params, const Tokenizer& tokenizer);

/// Everything a dataset run's content key is made of, with defaults resolved (pure, as task_key).
struct DatasetKeyInputs {
    std::string model_hash, tokenizer_hash, dataset_hash;
    std::string prompt_template;  ///< empty: the samples' `prompt` fields
    std::string dataset_name;
    LongBenchMetric metric = LongBenchMetric::QaF1;
    int max_length = 0;
    int max_new_tokens = 0;
    ChatTemplate chat_template = ChatTemplate::None;
    TaskPrefill prefill = TaskPrefill::Sparse;  ///< as effective_task_prefill gives it
    MethodKeyInputs method_key;
};
std::string dataset_task_key(const DatasetKeyInputs& inputs);

struct ResolvedDatasetTask {
    DatasetTaskParams params;
    DatasetRunFiles files;
    ResolvedEval method;
    int max_length = 0;
    std::string key;
};

/// Step 1: reads and checks the dataset, the template and answer-length files, the chat template, the method (for
/// kascade, the schedule from `db`; may be null for the other methods) and formats every sample's prompt, so that an
/// error names its file and line before anything is stored. Computes nothing.
ResolvedDatasetTask resolve_dataset_task(ResultsDb* db, const LoadedModel& model, const DatasetTaskParams& params);

/// The prompt text of sample `index` of a resolved run, before the chat template.
std::string dataset_sample_text(const ResolvedDatasetTask& r, int index);

/// The tokens the model reads for sample `index`: the text through the chat template, tokenized and cut.
DatasetPromptTokens dataset_sample_tokens(const ResolvedDatasetTask& r, const LoadedModel& model, int index);

/// Whether the first `samples` samples of the dataset task run `key` are stored (a sweep's dataset job is done).
bool dataset_samples_stored(ResultsDb& db, std::string_view key, int samples);

struct DatasetTaskSummary {
    int64_t task_run_id = 0;
    int samples_run = 0;     ///< computed by this call
    int samples_stored = 0;  ///< found stored already
    double score = 0;        ///< mean over the samples, in [0, 1] (LongBench prints it x 100)
    double density = 0;      ///< mean over the samples
    int truncated = 0;       ///< samples cut in the middle
};

/// Steps 2 and 3 for every sample not stored yet (with force: every sample, replacing the stored ones), then the
/// summary. progress (may be empty) is called after each sample with (done, total).
DatasetTaskSummary run_dataset_task(Workspace& ws, LoadedModel& model, const DatasetTaskParams& params,
                                    const std::function<void(int, int)>& progress = {}, bool force = false);

}  // namespace kascade
