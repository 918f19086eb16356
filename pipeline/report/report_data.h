// pipeline/report/report_data.h: what a report shows, read from a results folder: the selected runs (runs_flat)
// with their per-layer rows, their schedules and similarity artifacts (HDF5), the kernel benchmarks, and the
// selected samples of long-context task runs, on generated prompts (task_samples_flat) and on dataset files
// (dataset_samples_flat; report_task_data.h).
//
// Everything is read through a read-only SQLite connection and read-only HDF5 handles: a report never changes the
// results it describes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/modes.h"
#include "pipeline/report/report_task_data.h"

namespace kascade {

struct ReportRunLayer {
    int layer = 0;
    RunLayerRole role = RunLayerRole::Dense;
    std::optional<int> anchor_layer;
    double density = 0;                   ///< attended / causal pairs of the layer, [0, 1]
    std::optional<double> out_rel_error;  ///< ||out - out_dense|| / ||out_dense||
};

/// One row of runs_flat (the columns a report uses) and its per-layer rows.
struct ReportRun {
    std::int64_t id = 0;
    EvalMethod method = EvalMethod::Dense;
    std::optional<SchedulePolicy> policy;  ///< kascade runs
    std::optional<double> threshold;
    std::optional<std::int64_t> max_reuse_dist, n_anchors;
    std::string anchor_list;
    std::optional<SimilarityMetric> metric;            ///< kascade runs
    std::optional<SimilarityAggregation> aggregation;  ///< kascade runs
    std::optional<HeadMapMode> head_map;               ///< kascade runs
    std::optional<std::int64_t> tile, topk_tiles, k_min;
    std::optional<std::int64_t> page_size;  ///< quest: keys per page (its topk_tiles counts pages; tile is NULL)
    std::optional<double> topk_pct;
    // Sparse runs: the selection variant.
    std::optional<KeyGranularity> key_granularity;
    std::optional<KRule> k_rule;
    std::optional<Pooling> pooling;
    std::optional<std::int64_t> round_k;
    std::int64_t ctx = 0, token_offset = 0, n_tokens = 0;
    EvalPhase phase = EvalPhase::Prefill;
    std::optional<std::int64_t> prompt_tokens, decode_tokens;  ///< decode runs
    MatmulPrecision matmul = MatmulPrecision::Exact;           ///< the matrix products' numerics
    KvDType kv_dtype = KvDType::F32;                           ///< the KV cache's element type
    double ppl_dense = 0, ppl_sparse = 0, degradation_pct = 0, density = 1;
    std::optional<double> tokens_per_s;
    std::string model_path, model_hash, text_path, text_hash;
    std::optional<std::int64_t> schedule_id;
    std::string similarity_key;
    std::string calib_text_path;  ///< kascade runs: the text the schedule was calibrated on
    std::string git_commit;
    std::vector<ReportRunLayer> layers;
};

struct ReportScheduleLayer {
    int layer = 0;
    LayerRole role = LayerRole::Dense;
    std::optional<int> anchor_layer;
    std::vector<int> head_map;  ///< reuse layers: anchor KV head of each KV head
    std::optional<double> similarity;
};

struct ReportSchedule {
    std::int64_t id = 0;
    std::string key, similarity_key;
    SchedulePolicy policy = SchedulePolicy::Threshold;
    std::optional<SimilarityMetric> metric;
    std::optional<SimilarityAggregation> aggregation;
    HeadMapMode head_map = HeadMapMode::Argmax;
    std::optional<double> threshold;
    std::optional<std::int64_t> max_reuse_dist, n_anchors;
    std::string anchor_list;
    int n_layers = 0, n_anchor_layers = 0, n_reuse_layers = 0;
    std::vector<ReportScheduleLayer> layers;
};

/// A similarity artifact: per layer pair and KV-head pair, how well one layer's top-k tiles serve another.
struct ReportSimilarity {
    std::string key, path, git_commit;
    std::optional<std::int64_t> topk_tiles, k_min;
    std::optional<double> topk_pct;
    int n_layers = 0, n_kv_heads = 0;
    /// measure name (recall_mean, recall_min, jaccard_mean, jaccard_min) -> [L(b)][L(a)][Hkv(b)][Hkv(a)], NaN for
    /// a >= b.
    std::map<std::string, std::vector<float>> measures;
    std::vector<float> importance;  ///< [L]
    // From the capture it was computed from:
    std::int64_t ctx = 0, tile = 0, calib_offset = 0, calib_tokens = 0, n_windows = 0;
    std::string model_path, text_path;

    /// measure[b][a][hb][ha]
    float at(const std::string& measure, int b, int a, int hb, int ha) const;
    /// The layer-pair score the policies use: mean over b's KV heads of the best a head; NaN for a >= b.
    double layer_pair(const std::string& measure, int b, int a) const;
};

struct ReportKernelBench {
    std::string name, shape_json, git_commit, machine;
    std::int64_t threads = 0;
    double time_ms = 0;
    std::optional<double> speedup;
};

struct ReportData {
    std::filesystem::path results_dir;
    std::string where;            ///< the run selection, SQL on runs_flat ("" = none given)
    std::string task_where;       ///< the task sample selection, SQL on task_samples_flat ("" = none given)
    std::string dataset_where;    ///< the dataset sample selection, SQL on dataset_samples_flat ("" = none given)
    std::vector<ReportRun> runs;  ///< by id
    std::map<std::int64_t, ReportSchedule> schedules;      ///< of the selected kascade runs, by id
    std::map<std::string, ReportSimilarity> similarities;  ///< of those schedules, by key
    std::vector<ReportKernelBench> kernel_bench;           ///< every kernel_bench row (when runs are shown)
    std::vector<ReportTaskRun> task_runs;                  ///< by id, each with its selected samples
    std::vector<ReportTaskRun> dataset_runs;               ///< task runs on dataset files, the same way
    std::vector<std::string> notes;  ///< what could not be shown and why (e.g. an artifact file that is gone)
};

/// Which stored results a report shows: one SQL condition per kind, each "" when not given.
struct ReportSelection {
    std::string where;          ///< runs (runs_flat)
    std::string task_where;     ///< samples of task runs on generated prompts (task_samples_flat)
    std::string dataset_where;  ///< samples of task runs on dataset files (dataset_samples_flat)
};

/// Reads from <results_dir>/kascade.db the runs matching `where` with what they refer to, and the task and dataset
/// samples matching their conditions, grouped by task run. A condition selects its kind only: with `where` alone no
/// task run is read, with `task_where` alone no run and no dataset run; with none, everything is. Throws
/// kascade::Error if the database is missing, a condition is invalid SQL or matches nothing, or nothing is selected
/// at all (a folder with neither runs nor task runs).
ReportData load_report_data(const std::filesystem::path& results_dir, const ReportSelection& selection);

/// "stories260K" for ".../stories260K.bin", "smollm2-135m" for ".../smollm2-135m/", "wiki.test.raw" for a text.
std::string short_name(const std::string& path);

}  // namespace kascade
