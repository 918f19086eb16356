// pipeline/stages/eval_stage.h: stage 4, perplexity of the model on the test tokens with a sparse attention method,
// beside the dense perplexity of the same tokens; logs one run (parameters, metrics, per-layer rows) in SQLite.
//
// Methods (base/modes.h): kascade (a stored schedule), oracle (every layer but 0 keeps its own top-k), streaming
// (sink + recent keys, same budget), the decode-only baselines quest, omnikv and lessismore, dense (the baseline;
// every sparse run finds or makes the dense run of its tokens). A run is three steps: resolve (defaults from the
// schedule, validation, the content key), measure (the forward passes) and record (the database rows); run_eval chains
// them and skips the last two for a stored key.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/modes.h"
#include "kernels/attention_types.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/attention_schedule.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/quest_attention.h"
#include "pipeline/stages/capture_stage.h"

namespace kascade {

inline constexpr int kEvalFormatVersion = 1;

/// What to evaluate. The defaults here are the ones the CLI and sweep files show and use.
struct EvalParams {
    /// Tile when neither the option nor a schedule's capture gives one.
    static constexpr int kDefaultTile = SparseAttentionOptions{}.tile;

    EvalMethod method = EvalMethod::Kascade;
    EvalPhase phase = EvalPhase::Prefill;
    std::optional<int64_t> schedule_id;         ///< method kascade
    std::optional<TopKRule> topk;               ///< default for kascade: the rule the schedule's similarity used
    std::optional<int> tile;                    ///< default for kascade: the capture's tile; else kDefaultTile
    std::optional<KeyGranularity> granularity;  ///< default for kascade: the similarity's; else token (the paper)
    std::optional<Pooling> pooling;             ///< default post_softmax (the paper)
    int ctx = PerplexityOptions{}.ctx;          ///< prefill: positions per window (BOS included)
    int prompt_tokens = 256;                    ///< decode: positions prefilled densely per window (BOS included)
    int decode_tokens = 256;                    ///< decode: positions then decoded one at a time, each scored
    int quest_page = QuestOptions{}.page;       ///< quest: keys per page
    std::optional<int64_t> token_offset;        ///< default for kascade: right after the calibration range; else 0
    int64_t n_tokens = 8192;                    ///< test tokens scored (0: all after the offset)
    /// omnikv: its filter layers; lessismore: its selection layers, and the budget share of its sinks + recent keys
    std::vector<int> selection_layers;
    double window_ratio = LessIsMoreOptions{}.window_ratio;
    /// The matrix products' numerics (--matmul): exact, or bf16 (activations rounded to BF16 against BF16 weights).
    /// The dense baseline of a run uses the same, so a run's degradation is the method's alone.
    MatmulPrecision matmul = MatmulPrecision::Exact;
    /// The KV cache's element type (--kv-dtype): f32, or bf16 (keys and values rounded to BF16 as they are stored).
    /// The dense baseline of a run uses the same, as for matmul.
    KvDType kv_dtype = PerplexityOptions{}.kv_dtype;
};

/// An eval with every default filled in from the schedule, its similarity and its capture, checked, with its key.
struct ResolvedEval {
    EvalParams params;
    TopKRule topk;
    int tile = EvalParams::kDefaultTile;
    KeyGranularity granularity = KeyGranularity::Token;
    Pooling pooling = Pooling::PostSoftmax;
    int64_t token_offset = 0;
    int ctx = 0;                                  ///< positions per window: params.ctx, or prompt + decode tokens
    std::optional<Schedule> schedule;             ///< method kascade: the stored schedule
    std::optional<CaptureRecord> capture;         ///< method kascade: the capture the schedule was calibrated on
    std::optional<AttentionSchedule> layer_plan;  ///< method kascade: the schedule as the runtime runs it
    std::string key;                              ///< the run's content key
};

/// The method part of step 1 (no test tokens): defaults from the schedule (read from `db`, checked to belong to the
/// model of model_hash; db may be null for other methods), the top-k rule, tile <= ctx. What `kascade generate`
/// samples with. `ctx_name` says what ctx is in the caller's own options, for the messages (default: ctx, or
/// prompt-tokens + decode-tokens in decode).
ResolvedEval resolve_method(ResultsDb* db, const std::string& model_hash, const std::string& model_path,
                            const EvalParams& params, int ctx, std::string_view ctx_name = {});

/// The checks of step 1 that need the model but no results folder: token counts, the decode window within the
/// model's context, the decode-only methods only in decode, their layer lists within the model. A sweep's dry run
/// runs them too (check_sweep_inputs).
void check_eval_params(const LoadedModel& model, const EvalParams& params);

/// OmniKV's filter layers, LessIsMore's selection layers and window ratio checked against a model of n_layers (nothing
/// for the other methods); the errors name the command-line options.
void check_method_layers(const EvalParams& params, int n_layers);

/// Step 1: fills in defaults, checks everything a user gave (an error names the option, value and expectation) and
/// computes the content key. Reads the database, computes nothing.
ResolvedEval resolve_eval(Workspace& ws, const LoadedModel& model, const LoadedText& text, const EvalParams& params);

/// The sparse attention options of a resolved eval (what the policy is built with).
SparseAttentionOptions eval_attention_options(const ResolvedEval& r);

/// The attention policy of a resolved method for a model of n_layers (its layer_density() says what it attended).
std::unique_ptr<AttentionPolicy> make_method_policy(const ResolvedEval& r, int n_layers);

/// What step 2 measured.
struct EvalMeasurement {
    PerplexityResult perplexity;            ///< the timed pass (decode: the decode steps)
    std::vector<LayerDensity> density;      ///< per layer; empty for dense
    std::vector<RunLayerRole> layer_roles;  ///< per layer, from the policy
    std::vector<double> out_rel_error;      ///< per layer, on the first window; empty for dense
    double wall_s = 0;                      ///< the timed pass and the error probe
    std::string started_at, finished_at;
};

/// Step 2: the forward passes of a resolved eval.
EvalMeasurement measure_eval(const LoadedModel& model, const LoadedText& text, const ResolvedEval& r);

struct EvalResult {
    int64_t run_id = 0;
    bool cached = false;
};

/// Step 3: stores the run, its metrics (beside `dense`, the metrics of the dense run of the same tokens; none for a
/// dense run) and its per-layer rows. replace: overwrite a stored run of the same key.
EvalResult record_eval(Workspace& ws, const LoadedModel& model, const LoadedText& text, const ResolvedEval& r,
                       const EvalMeasurement& m, const std::optional<RunMetrics>& dense, bool replace);

/// resolve, then (unless the key is stored, or with force) the dense run of the same tokens, measure and record.
EvalResult run_eval(Workspace& ws, LoadedModel& model, LoadedText& text, const EvalParams& params, bool force = false);

/// The content hashes of what a run reads: the model, its tokenizer and the text (as the loaders compute them).
struct RunInputHashes {
    std::string model, tokenizer, text;
};

/// The content key of a resolved run: the one key builder, used by resolve_eval and by a sweep's planner (which
/// resolves its jobs from the sweep file alone), so a planned job and the run it becomes share their key. Pure: a
/// sweep's --dry-run uses it to tell what is stored already. `schedule_key`: the schedule's key (method kascade).
std::string eval_key(const ResolvedEval& r, const RunInputHashes& hashes, std::string_view schedule_key);

/// The method columns runs and task_runs share (left NULL where the method has none): the numerics, matrix products'
/// and KV cache's (every run), the key budget (top-k tiles,
/// or percentage with k_min and k rule; round_k), quest's page size, OmniKV's and LessIsMore's tile, layers and
/// window ratio (they select single keys and pool in their own way), and the tile, key granularity and pooling of
/// the other sparse methods.
template <class Record>
void set_method_columns(const ResolvedEval& r, Record& record) {
    const EvalMethod method = r.params.method;
    record.matmul = std::string(mode_name(r.params.matmul));
    record.kv_dtype = std::string(mode_name(r.params.kv_dtype));
    if (method == EvalMethod::Dense) return;
    if (r.topk.tiles > 0) {
        record.topk_tiles = r.topk.tiles;
    } else {
        record.topk_pct = r.topk.pct;
        record.k_min = r.topk.k_min_tokens;
        record.k_rule = std::string(mode_name(r.topk.k_rule));
    }
    record.round_k = r.topk.round_k;
    if (method == EvalMethod::Quest) {
        record.page_size = r.params.quest_page;
    } else if (method == EvalMethod::OmniKv || method == EvalMethod::LessIsMore) {
        record.tile = r.tile;
        record.key_granularity = std::string(mode_name(KeyGranularity::Token));
        record.selection_layers = nlohmann::json(r.params.selection_layers).dump();
        if (method == EvalMethod::LessIsMore) record.window_ratio = r.params.window_ratio;
    } else {
        record.tile = r.tile;
        record.key_granularity = std::string(mode_name(r.granularity));
        record.pooling = std::string(mode_name(r.pooling));
    }
}

/// The method's part of a content key (eval, task and dataset task runs): the method, its budget and its numerics,
/// with defaults resolved.
struct MethodKeyInputs {
    EvalMethod method = EvalMethod::Dense;
    int tile = 0;                                        ///< ignored for dense and quest
    TopKRule topk;                                       ///< ignored for dense
    std::string schedule_key;                            ///< method kascade
    KeyGranularity granularity = KeyGranularity::Token;  ///< ignored for dense and quest
    Pooling pooling = Pooling::PostSoftmax;              ///< ignored for dense and quest
    int quest_page = 0;                                  ///< quest
    std::vector<int> selection_layers{};                 ///< omnikv, lessismore
    double window_ratio = 0;                             ///< lessismore
    MatmulPrecision matmul = MatmulPrecision::Exact;
    KvDType kv_dtype = EvalParams{}.kv_dtype;
};
/// The method part of a resolved method (its schedule's key for kascade).
MethodKeyInputs method_key_inputs(const ResolvedEval& r);
/// Adds m to a content key: the schedule to its inputs (method kascade); to its params the method's name, its
/// parameters (nothing for dense; the page size and top-k rule for quest; tile, top-k rule and filter layers for
/// omnikv; tile, top-k rule, selection layers, window ratio and sink tokens for lessismore; tile, top-k rule, key
/// granularity and pooling for the others) and its numerics ("matmul" for bf16 products, "kv_dtype" for a bf16 cache).
void add_method_key(const MethodKeyInputs& m, nlohmann::json& inputs, nlohmann::json& params);

}  // namespace kascade
