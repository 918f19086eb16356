// io/store/records.h: the rows of the results database (results/kascade.db) as plain C++ structs.
//
// Each record lists its columns once, in fields(): name + member pointer. That list drives the INSERT and SELECT
// statements of ResultsDb, and a test checks it against the migrated schema (PRAGMA table_info), so a column added
// to a migration but forgotten here (or the reverse) fails the tests instead of silently not being stored.
// The CREATE statements themselves live in schema.cpp as frozen per-version migrations: a migration must always
// produce the same schema, whatever the structs look like later.
//
// Integer columns are std::int64_t, REAL columns double, TEXT columns std::string; nullable columns are optional.
// Auto-increment ids (`id`) are not in fields(): SQLite assigns them and ResultsDb fills them in on read.
// Timestamps are UTC ISO-8601 strings ("2026-01-31T12:34:56Z"); an empty created_at is filled in on insert.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kascade {

/// One column of a table, bound to the struct member that holds it.
template <class Record>
struct Field {
    using Member = std::variant<std::int64_t Record::*, double Record::*, std::string Record::*,
                                std::optional<std::int64_t> Record::*, std::optional<double> Record::*,
                                std::optional<std::string> Record::*>;
    std::string_view name;  ///< column name in the table
    Member member;          ///< where the value lives in the record
};

/// A model checkpoint, identified by the hash of its weights/config (table `models`).
struct ModelRecord {
    std::int64_t id = 0;
    std::string hash;        ///< content hash of the checkpoint (hash_hex); UNIQUE
    std::string path;        ///< model dir or .bin file as first registered
    std::string format;      ///< "safetensors" or "llama2c"
    std::string model_type;  ///< "llama", "mistral", "qwen2", "llama2c"
    std::int64_t n_layers = 0;
    std::int64_t n_heads = 0;     ///< query heads
    std::int64_t n_kv_heads = 0;  ///< key/value heads (GQA groups)
    std::int64_t head_dim = 0;
    std::int64_t dim = 0;  ///< hidden size
    std::int64_t vocab_size = 0;
    std::string created_at;

    static constexpr std::string_view table = "models";
    static const std::vector<Field<ModelRecord>>& fields();
};

/// A text corpus file, identified by the hash of its bytes (table `texts`).
struct TextRecord {
    std::int64_t id = 0;
    std::string hash;  ///< hash_file_hex of the file; UNIQUE
    std::string path;
    std::int64_t bytes = 0;  ///< file size, bytes
    std::string created_at;

    static constexpr std::string_view table = "texts";
    static const std::vector<Field<TextRecord>>& fields();
};

/// One cached stage output file (table `artifacts`). Inserted only once the file is complete and renamed in place.
struct ArtifactRecord {
    std::string key;    ///< content key: hash of input keys + params + stage format version; PRIMARY KEY
    std::string stage;  ///< "capture", "similarity" or "schedule"
    std::string path;   ///< relative to the results dir, e.g. "artifacts/capture/<key>.h5"
    std::int64_t model_id = 0;
    std::int64_t format_version = 0;  ///< the stage's artifact format version (root attribute format_version)
    std::string params_json;          ///< the stage parameters, JSON object
    std::string input_keys_json;      ///< keys/hashes of the inputs, JSON object
    std::int64_t bytes = 0;           ///< file size, bytes
    std::string created_at;
    /// XXH3-64 of the file's bytes, 16 hex digits, taken when it was stored and compared before libhdf5 opens the
    /// file (it may crash on a damaged one); none for artifacts stored before schema version 5.
    std::optional<std::string> checksum;

    static constexpr std::string_view table = "artifacts";
    static const std::vector<Field<ArtifactRecord>>& fields();
};

/// Detail row of a capture artifact (table `captures`).
struct CaptureRecord {
    std::string artifact_key;  ///< = artifacts.key
    std::int64_t model_id = 0;
    std::int64_t text_id = 0;
    std::string tokenizer_hash;
    std::int64_t token_offset = 0;  ///< first token of the captured range in the tokenized text
    std::int64_t n_tokens = 0;      ///< tokens captured (n_windows * ctx)
    std::int64_t ctx = 0;           ///< window length, tokens
    std::int64_t tile = 0;          ///< tile size, tokens
    std::int64_t save_qk = 0;       ///< 1 if the artifact also holds q and k

    static constexpr std::string_view table = "captures";
    static const std::vector<Field<CaptureRecord>>& fields();
};

/// Detail row of a similarity artifact (table `similarities`).
struct SimilarityRecord {
    std::string artifact_key;                ///< = artifacts.key
    std::string capture_key;                 ///< the capture it was computed from
    std::optional<std::int64_t> topk_tiles;  ///< fixed k in tiles, or NULL when topk_pct is used
    std::optional<double> topk_pct;          ///< k as % of the causal context, or NULL
    std::optional<std::int64_t> k_min;       ///< lower bound on k, tokens (with topk_pct)
    std::string metrics_json;  ///< JSON array of the stored measure datasets, e.g. ["recall_mean","recall_min"]

    static constexpr std::string_view table = "similarities";
    static const std::vector<Field<SimilarityRecord>>& fields();
};

/// A Kascade schedule: which layers are dense, anchors, or reuse an anchor (table `schedules`).
struct ScheduleRecord {
    std::int64_t id = 0;
    std::string key;                            ///< content key; UNIQUE (same inputs+params => same schedule)
    std::optional<std::string> similarity_key;  ///< the similarity artifact it was derived from; NULL for 'fixed'
    std::int64_t model_id = 0;
    std::string policy;                          ///< "threshold", "dp" or "fixed"
    std::optional<double> threshold;             ///< threshold policy: minimum similarity to reuse
    std::optional<std::int64_t> max_reuse_dist;  ///< threshold policy: max layers between a reuse layer and its anchor
    std::optional<std::int64_t> n_anchors;       ///< dp policy: K, layer 0 included
    std::optional<std::string> anchor_list;      ///< fixed policy: JSON array of anchor layers, e.g. "[0,2,8]"
    std::optional<std::string> metric;           ///< similarity measure used: "recall" or "jaccard"
    std::optional<std::string> aggregation;      ///< over query tiles: "mean" or "min"
    std::string head_map;                        ///< "argmax", "identity" or "pooled"
    std::int64_t n_layers = 0;
    std::int64_t n_anchor_layers = 0;  ///< layers that select their own tiles (role dense or anchor); set on insert
    std::int64_t n_reuse_layers = 0;   ///< layers with role reuse; set on insert
    std::string created_at;

    static constexpr std::string_view table = "schedules";
    static const std::vector<Field<ScheduleRecord>>& fields();
};

/// One layer of a schedule (table `schedule_layers`).
struct ScheduleLayerRecord {
    std::int64_t schedule_id = 0;  ///< set by insert_schedule
    std::int64_t layer = 0;
    std::string role;                          ///< "dense", "anchor" or "reuse"
    std::optional<std::int64_t> anchor_layer;  ///< reuse layers: the earlier dense/anchor layer whose tiles they use
    std::optional<std::string> head_map_json;  ///< reuse layers: JSON array [n_kv_heads] of anchor KV heads
    std::optional<double> similarity;          ///< reuse layers: aggregated similarity to the anchor

    static constexpr std::string_view table = "schedule_layers";
    static const std::vector<Field<ScheduleLayerRecord>>& fields();
};

/// One evaluation (table `runs`): every parameter that determines its result, plus where and when it ran.
struct RunRecord {
    std::int64_t id = 0;
    std::string key;  ///< content key of inputs + params; UNIQUE (re-running the same thing is a cache hit)
    std::int64_t model_id = 0;
    std::int64_t text_id = 0;
    std::optional<std::int64_t> schedule_id;     ///< set iff method == "kascade"
    std::string method;                          ///< kascade, dense, oracle, streaming, quest, omnikv, lessismore
    std::optional<std::int64_t> tile;            ///< tile size, tokens (sparse methods)
    std::optional<std::int64_t> topk_tiles;      ///< fixed k in tiles, or NULL
    std::optional<double> topk_pct;              ///< k as % of the causal context, or NULL
    std::optional<std::int64_t> k_min;           ///< lower bound on k, tokens
    std::optional<std::string> key_granularity;  ///< sparse methods: "token" (the paper) or "tile"
    std::optional<std::string> k_rule;           ///< with topk_pct: "sequence", "rolling" or "visible"
    std::optional<std::int64_t> round_k;         ///< sparse methods: k rounded up to a multiple of it (0 = not)
    std::optional<std::string> pooling;          ///< sparse methods: "post_softmax" or "pre_softmax"
    std::optional<std::int64_t> sink_tokens;     ///< streaming, lessismore: attention-sink tokens kept
    std::optional<std::int64_t> window_tokens;   ///< streaming: recent-window tokens kept
    std::int64_t ctx = 0;                        ///< evaluation window length, tokens
    std::int64_t token_offset = 0;               ///< first evaluated token in the tokenized text
    std::int64_t n_tokens = 0;                   ///< tokens evaluated
    std::string git_commit;
    std::string machine;  ///< host name / CPU model
    std::int64_t threads = 0;
    std::string started_at;
    std::string finished_at;
    std::string status = "done";                ///< always "done": a run is stored only when complete
    std::string phase = "prefill";              ///< "prefill" (perplexity windows) or "decode"
    std::optional<std::int64_t> prompt_tokens;  ///< decode: positions prefilled densely per window (BOS included)
    std::optional<std::int64_t> decode_tokens;  ///< decode: tokens decoded one at a time per window, each scored
    std::optional<std::int64_t> page_size;      ///< quest: keys per page
    /// omnikv (its filter layers), lessismore (its selection layers): a JSON array, e.g. [2,8,18]
    std::optional<std::string> selection_layers;
    std::optional<double> window_ratio;  ///< lessismore: share of the budget for sinks + recent keys
    std::string matmul = "exact";        ///< the matrix products' numerics: "exact" or "bf16" (--matmul)
    std::string kv_dtype = "f32";        ///< the KV cache's element type: "f32" or "bf16" (--kv-dtype)

    static constexpr std::string_view table = "runs";
    static const std::vector<Field<RunRecord>>& fields();
};

/// The results of one run (table `run_metrics`, one row per run).
struct RunMetrics {
    std::int64_t run_id = 0;                ///< set by insert_run
    std::int64_t n_scored = 0;              ///< next-token predictions scored
    std::optional<double> nll_dense;        ///< mean NLL with dense attention, nats/token
    std::optional<double> ppl_dense;        ///< exp(nll_dense)
    double nll_sparse = 0;                  ///< mean NLL with the run's method, nats/token (dense runs: = dense)
    double ppl_sparse = 0;                  ///< exp(nll_sparse)
    std::optional<double> degradation_pct;  ///< 100 * (ppl_sparse / ppl_dense - 1)
    double density = 0;                     ///< attended / causal (query, key) pairs, in [0, 1], all layers
    std::optional<double> tokens_per_s;     ///< evaluation throughput, tokens/s
    std::optional<double> attn_ms_dense;    ///< attention time in dense layers, ms per window (summed over layers)
    std::optional<double> attn_ms_anchor;   ///< same for anchor layers
    std::optional<double> attn_ms_reuse;    ///< same for reuse layers
    double wall_s = 0;                      ///< wall time of the whole run, s

    static constexpr std::string_view table = "run_metrics";
    static const std::vector<Field<RunMetrics>>& fields();
};

/// Per-layer results of one run (table `run_layers`).
struct RunLayerRecord {
    std::int64_t run_id = 0;  ///< set by insert_run
    std::int64_t layer = 0;
    std::string role;                          ///< dense, anchor, reuse, streaming, quest, filter, selection
    std::optional<std::int64_t> anchor_layer;  ///< reuse layers: the anchor used
    double density = 0;                        ///< attended / causal (query, key) pairs in this layer, [0, 1]
    std::optional<double> attn_ms;             ///< attention time of this layer, ms per window
    std::optional<double> out_rel_error;       ///< ||out - out_dense|| / ||out_dense|| of the attention output

    static constexpr std::string_view table = "run_layers";
    static const std::vector<Field<RunLayerRecord>>& fields();
};

/// A long-context task run (table `task_runs`): a method with its budget or schedule on a task with its seed and
/// haystack. Its samples are task_samples rows.
struct TaskRunRecord {
    std::int64_t id = 0;
    std::string key;  ///< content key; UNIQUE
    std::int64_t model_id = 0;
    std::optional<std::int64_t> text_id;      ///< the haystack file; NULL: the built-in filler
    std::optional<std::int64_t> schedule_id;  ///< set iff method == "kascade"
    std::string task;    ///< "passkey", "niah_single", ... (pipeline/tasks/task_kind.h), or "dataset"
    std::string metric;  ///< "number_match", "string_match_all", "string_match_part", or a LongBench metric
    std::optional<std::string> dataset_name;   ///< task "dataset": the --dataset-name (text_id: the JSONL file)
    std::optional<std::int64_t> max_length;    ///< task "dataset": prompts longer are cut in the middle to it
    std::optional<std::string> chat_template;  ///< task "dataset": the chat template family, or "none"
    std::int64_t seed = 0;
    std::int64_t max_new_tokens = 0;
    std::string prefill;  ///< "sparse" (the prompt with the method) or "dense" (decode-only ablation)
    std::string method;   ///< as runs.method
    std::optional<std::int64_t> tile;
    std::optional<std::int64_t> topk_tiles;
    std::optional<double> topk_pct;
    std::optional<std::int64_t> k_min;
    std::optional<std::string> k_rule;
    std::optional<std::int64_t> round_k;
    std::optional<std::string> key_granularity;
    std::optional<std::string> pooling;
    std::optional<std::int64_t> page_size;  ///< quest
    std::string git_commit;
    std::string machine;
    std::string created_at;
    std::optional<std::string> selection_layers;  ///< omnikv, lessismore: as runs.selection_layers
    std::optional<double> window_ratio;           ///< lessismore
    std::string matmul = "exact";                 ///< as runs.matmul
    std::string kv_dtype = "f32";                 ///< as runs.kv_dtype

    static constexpr std::string_view table = "task_runs";
    static const std::vector<Field<TaskRunRecord>>& fields();
};

/// One generated and scored sample of a task run (table `task_samples`).
struct TaskSampleRecord {
    std::int64_t task_run_id = 0;
    std::int64_t length = 0;  ///< prompt tokens, BOS included
    double depth_pct = 0;     ///< requested depth of the asked needle, % of the haystack
    std::int64_t sample_index = 0;
    double needle_depth = 0;    ///< where it is, fraction of the haystack's tokens
    std::string expected_json;  ///< JSON array of the strings the answer must contain
    std::string generated;      ///< the greedy answer (up to EOS, a newline or the token limit)
    double score = 0;           ///< in [0, 1], by the run's metric
    std::int64_t generated_tokens = 0;
    double density = 0;  ///< attended / causal (query, key) pairs over the method's passes, all layers
    std::optional<double> prefill_tokens_per_s;
    std::optional<double> decode_tokens_per_s;  ///< NULL when the answer took one token (no decode step)
    std::int64_t threads = 0;
    std::string finished_at;
    std::int64_t batch = 1;  ///< samples decoded together with this one, itself included (--batch)

    static constexpr std::string_view table = "task_samples";
    static const std::vector<Field<TaskSampleRecord>>& fields();
};

/// One generated and scored sample of a dataset task run (table `dataset_samples`).
struct DatasetSampleRecord {
    std::int64_t task_run_id = 0;
    std::int64_t sample_index = 0;         ///< 0-based among the dataset file's non-blank lines
    std::optional<std::string> sample_id;  ///< LongBench's _id
    std::int64_t prompt_tokens = 0;        ///< what the model read, BOS included
    std::int64_t full_tokens = 0;          ///< before the middle cut (= prompt_tokens if not cut)
    std::optional<std::int64_t> cut_at;    ///< where the middle was cut out of the prompt; NULL: not cut
    std::string answers_json;              ///< JSON array of the reference answers
    std::string generated;                 ///< the greedy answer (up to EOS, the token limit, or a newline for
                                           ///< the datasets scored on their first line)
    double score = 0;                      ///< in [0, 1], by the run's metric, best over the answers
    std::int64_t generated_tokens = 0;
    double density = 0;
    std::optional<double> prefill_tokens_per_s;
    std::optional<double> decode_tokens_per_s;
    std::int64_t threads = 0;
    std::string finished_at;
    std::int64_t batch = 1;  ///< samples decoded together with this one, itself included (--batch)

    static constexpr std::string_view table = "dataset_samples";
    static const std::vector<Field<DatasetSampleRecord>>& fields();
};

/// One kernel benchmark measurement (table `kernel_bench`).
struct KernelBenchRecord {
    std::int64_t id = 0;
    std::string name;        ///< benchmark name, e.g. "sparse_reuse_prefill"
    std::string shape_json;  ///< JSON object of the shape parameters (L, heads, head_dim, k, tile, ...)
    std::int64_t threads = 0;
    double time_ms = 0;             ///< median time per call, ms
    std::optional<double> gflops;   ///< achieved GFLOP/s (prefill kernels)
    std::optional<double> gbps;     ///< achieved GB/s (decode kernels)
    std::optional<double> speedup;  ///< dense time / this time at the same shape
    std::string git_commit;
    std::string machine;
    std::string created_at;

    static constexpr std::string_view table = "kernel_bench";
    static const std::vector<Field<KernelBenchRecord>>& fields();
};

/// A sweep as planned: its jobs in plan order (table `sweeps`). The key is the hash of the job keys, so the same
/// grid of the same inputs is the same sweep wherever and however often it is planned.
struct SweepRecord {
    std::string key;   ///< content key of the plan; PRIMARY KEY
    std::string file;  ///< the sweep file, absolute path, as planned first
    std::int64_t n_jobs = 0;
    std::string created_at;

    static constexpr std::string_view table = "sweeps";
    static const std::vector<Field<SweepRecord>>& fields();
};

/// One job of a sweep (table `sweep_jobs`).
struct SweepJobRecord {
    std::string sweep_key;
    std::int64_t job_index = 0;  ///< position in the plan (= Slurm array task id)
    std::string stage;           ///< "capture", "similarity", "schedule", "eval" or "task"
    std::string job_key;         ///< content key of its output (artifacts.key, schedules.key, runs.key, task_runs.key)
    std::string label;           ///< its parameters, for logs
    std::string depends_on;      ///< JSON array of the job indices whose outputs it reads
    /// Task jobs: the samples they store, {"lengths": [...], "depths_pct": [...], "samples": N}; else NULL.
    std::optional<std::string> task_grid;

    static constexpr std::string_view table = "sweep_jobs";
    static const std::vector<Field<SweepJobRecord>>& fields();
};

/// A job that ended with an error (table `job_failures`); a later success of the same job supersedes it.
struct JobFailureRecord {
    std::int64_t id = 0;
    std::string sweep_key;
    std::int64_t job_index = 0;
    std::string job_key;
    std::string machine;
    std::string error;  ///< the error message
    std::string failed_at;

    static constexpr std::string_view table = "job_failures";
    static const std::vector<Field<JobFailureRecord>>& fields();
};

/// One Slurm job array submitted for a sweep (table `slurm_arrays`).
struct SlurmArrayRecord {
    std::string job_id;  ///< Slurm's array job id; PRIMARY KEY
    std::string sweep_key;
    std::int64_t level = 0;   ///< dependency level: 0 needs nothing of this submission, n waits for level n-1
    std::string job_indices;  ///< JSON array of the sweep job indices (= array task ids)
    std::string script;       ///< the batch script, absolute path
    std::string submitted_at;

    static constexpr std::string_view table = "slurm_arrays";
    static const std::vector<Field<SlurmArrayRecord>>& fields();
};

}  // namespace kascade
