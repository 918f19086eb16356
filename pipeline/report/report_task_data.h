// pipeline/report/report_task_data.h: the long-context task runs a report shows, on generated prompts
// (pipeline/stages/task_stage.h, read from task_samples_flat) and on dataset files
// (pipeline/stages/dataset_task_stage.h, read from dataset_samples_flat), through the report's read-only connection,
// with the names a reader knows a method configuration by ("kascade dp anchors=2 topk 10% (sparse prefill)").
//
// A report selects samples, not task runs (`--task-where` is a condition on task_samples_flat, as for `kascade query
// tasks`; `--dataset-where` one on dataset_samples_flat, as for `kascade query datasets`): every mean here is over a
// run's selected samples only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/modes.h"

namespace kascade {

class QueryDb;

/// One scored sample: what the heatmaps and means are made of.
struct ReportTaskSample {
    std::int64_t length = 0;  ///< prompt tokens, BOS included (dataset samples: after the middle cut)
    double depth_pct = 0;     ///< requested depth of the asked needle, % of the haystack (dataset samples: NaN)
    std::int64_t sample_index = 0;
    double score = 0;    ///< [0, 1] by the run's metric
    double density = 0;  ///< attended / causal (query, key) pairs over the method's passes, all layers, [0, 1]
    bool cut = false;    ///< dataset samples: the prompt was cut in the middle to the run's max_length
};

/// One task run (a method with its budget or schedule on a task) and its selected samples.
struct ReportTaskRun {
    std::int64_t id = 0;
    std::string task;    ///< passkey | niah_single | ... (pipeline/tasks/task_kind.h) | dataset
    std::string metric;  ///< number_match | string_match_all | string_match_part | a LongBench metric
    TaskPrefill prefill = TaskPrefill::Sparse;  ///< the prompt through the method, or dense (decode-only ablation)
    EvalMethod method = EvalMethod::Dense;
    std::int64_t seed = 0, max_new_tokens = 0;
    // Kascade: the schedule and its policy setting (from the schedules table).
    std::optional<std::int64_t> schedule_id;
    std::optional<SchedulePolicy> policy;
    std::optional<double> threshold;
    std::optional<std::int64_t> max_reuse_dist, n_anchors;
    std::string anchor_list;
    // The key budget (NULL where the method has none: dense).
    std::optional<std::int64_t> tile, topk_tiles, k_min, round_k, page_size;
    std::optional<double> topk_pct;
    std::optional<KRule> k_rule;
    std::optional<KeyGranularity> key_granularity;
    std::optional<Pooling> pooling;
    std::string model_path, model_hash;
    std::string haystack_path;  ///< empty: the built-in filler; dataset runs: the JSONL file
    // Dataset runs only:
    std::string dataset_name;                ///< e.g. "hotpotqa": the name the prompt and length files know it by
    std::optional<std::int64_t> max_length;  ///< prompt tokens after the middle cut
    std::string chat_template;               ///< the family applied, or "none"
    std::string git_commit;
    std::vector<ReportTaskSample> samples;  ///< selected ones, by length, depth, index; never empty

    double mean_score() const;
    double mean_density() const;
    /// Mean score and mean density of the samples of each prompt length.
    std::map<std::int64_t, double> score_by_length() const;
    std::map<std::int64_t, double> density_by_length() const;
};

/// The method with its schedule setting: "dense", "oracle", "kascade dp anchors=2", "kascade threshold 0.65 max
/// dist 4", "kascade fixed anchors 0,2".
std::string task_method_text(const ReportTaskRun& r);
/// The key budget: "topk 10%", "topk 8 tiles of 16", "topk 4 pages of 16" (quest); empty for dense.
std::string task_budget_text(const ReportTaskRun& r);
/// The whole configuration: "dense", "oracle topk 10% (dense prefill)", "kascade dp anchors=2 topk 10% (sparse
/// prefill)". Dense has no prefill mode of its own (it is always dense).
std::string task_run_label(const ReportTaskRun& r);
/// The short name of a haystack: "filler" (built in) or the text file's name.
std::string task_haystack_name(const ReportTaskRun& r);

/// The samples matching `task_where` (SQL on task_samples_flat; empty: all), grouped into their task runs by id.
/// Throws kascade::Error naming the condition if it is invalid SQL; returns no runs if it matches nothing.
std::vector<ReportTaskRun> load_report_task_runs(QueryDb& db, const std::string& task_where);
/// The same for the dataset samples matching `dataset_where` (SQL on dataset_samples_flat; empty: all).
std::vector<ReportTaskRun> load_report_dataset_runs(QueryDb& db, const std::string& dataset_where);

}  // namespace kascade
