#include "pipeline/stages/eval_stage.h"

#include <omp.h>

#include <map>

#include "base/error.h"
#include "build_info.h"
#include "io/host_info.h"
#include "pipeline/runtime/decode_perplexity.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/omnikv_attention.h"
#include "pipeline/runtime/output_error_probe.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/runtime/quest_attention.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/topk_rule_params.h"

namespace kascade {

namespace {

/// Which of the stored attention times (attn_ms_dense / _anchor / _reuse) a layer's time goes to: streaming layers
/// attend a fixed set, as reuse layers do; Quest layers rank pages, and OmniKV's filter and LessIsMore's selection
/// layers rank keys, as anchors rank keys.
LayerRole attention_time_kind(RunLayerRole role) {
    switch (role) {
        case RunLayerRole::Dense:
            return LayerRole::Dense;
        case RunLayerRole::Anchor:
        case RunLayerRole::Quest:
        case RunLayerRole::Filter:
        case RunLayerRole::Selection:
            return LayerRole::Anchor;
        case RunLayerRole::Reuse:
        case RunLayerRole::Streaming:
            return LayerRole::Reuse;
    }
    return LayerRole::Dense;
}

/// The defaults a kascade run takes from its schedule: the similarity's selection and the capture's tile.
void resolve_schedule(ResultsDb& db, const std::string& model_hash, const std::string& model_path, ResolvedEval& r) {
    const EvalParams& params = r.params;
    KASCADE_CHECK(params.schedule_id.has_value(), "method kascade needs --schedule ID (see `kascade status`)");
    r.schedule = db.load_schedule(*params.schedule_id);
    KASCADE_CHECK(r.schedule.has_value(), "no schedule with id {} in {}", *params.schedule_id, db.db_file().string());
    const auto schedule_model = db.find_model(r.schedule->record.model_id);
    if (!schedule_model || schedule_model->hash != model_hash) {
        KASCADE_FAIL("schedule {} was made for model \"{}\" (hash {}), not for \"{}\" (hash {})", *params.schedule_id,
                     schedule_model ? schedule_model->path : "?", schedule_model ? schedule_model->hash : "?",
                     model_path, model_hash);
    }
    const auto similarity = db.find_similarity(r.schedule->record.similarity_key.value_or(""));
    KASCADE_CHECK(similarity.has_value(), "schedule {} has no similarity artifact in {}", *params.schedule_id,
                  db.db_file().string());
    r.capture = db.find_capture(similarity->capture_key);
    KASCADE_CHECK(r.capture.has_value(), "similarity {} has no capture in {}", similarity->artifact_key,
                  db.db_file().string());
    r.layer_plan = attention_schedule_from(*r.schedule);
    // The selection the similarity measured. Artifacts made before k rules and key granularity existed were
    // tile-granular with the per-tile visible-context rule.
    const nlohmann::json sim_params = nlohmann::json::parse(db.find_artifact(similarity->artifact_key)->params_json);
    r.topk = TopKRule{static_cast<int>(similarity->topk_tiles.value_or(0)),
                      static_cast<float>(similarity->topk_pct.value_or(0)),
                      static_cast<int>(similarity->k_min.value_or(TopKRule{}.k_min_tokens)),
                      parse_mode<KRule>(sim_params.value("k_rule", std::string("visible")), "similarity k_rule"),
                      sim_params.value("round_k", 0)};
    r.granularity = parse_mode<KeyGranularity>(sim_params.value("key_granularity", std::string("tile")),
                                               "similarity key_granularity");
    if (!params.tile) r.tile = static_cast<int>(r.capture->tile);
}

/// The dense run every sparse run is compared with: the same tokens, phase and windows, nothing sparse. Resolved
/// from the sparse run alone: its tokens and windows were checked when it was resolved.
ResolvedEval dense_baseline_of(const ResolvedEval& r, const RunInputHashes& hashes) {
    // Built from the defaults, not from a copy of r.params: no method setting of the sparse run can leak into it.
    ResolvedEval dense;
    dense.params.method = EvalMethod::Dense;
    dense.params.phase = r.params.phase;
    dense.params.ctx = r.params.ctx;
    dense.params.prompt_tokens = r.params.prompt_tokens;
    dense.params.decode_tokens = r.params.decode_tokens;
    dense.params.token_offset = r.token_offset;
    dense.params.n_tokens = r.params.n_tokens;
    dense.params.matmul = r.params.matmul;
    dense.params.kv_dtype = r.params.kv_dtype;
    dense.token_offset = r.token_offset;
    dense.ctx = r.ctx;
    dense.key = eval_key(dense, hashes, "");
    return dense;
}

/// The metrics of the dense run of r's tokens: the stored run, or one measured and recorded now.
RunMetrics dense_baseline_metrics(Workspace& ws, const LoadedModel& model, const LoadedText& text,
                                  const ResolvedEval& r) {
    const ResolvedEval dense = dense_baseline_of(r, {model.model_hash, model.tokenizer_hash, text.hash});
    std::optional<int64_t> id = ws.db().find_run(dense.key);
    if (!id) id = record_eval(ws, model, text, dense, measure_eval(model, text, dense), std::nullopt, false).run_id;
    return ws.db().load_run(*id).metrics;
}

}  // namespace

ResolvedEval resolve_method(ResultsDb* db, const std::string& model_hash, const std::string& model_path,
                            const EvalParams& params, int ctx, std::string_view ctx_name) {
    if (ctx_name.empty()) ctx_name = params.phase == EvalPhase::Decode ? "prompt-tokens + decode-tokens" : "ctx";
    ResolvedEval r;
    r.params = params;
    r.ctx = ctx;
    r.tile = params.tile.value_or(EvalParams::kDefaultTile);
    r.granularity = SparseAttentionOptions{}.granularity;
    r.pooling = SparseAttentionOptions{}.pooling;
    if (params.method == EvalMethod::Kascade) {
        KASCADE_ASSERT(db != nullptr);
        resolve_schedule(*db, model_hash, model_path, r);
    }
    if (params.topk) r.topk = *params.topk;
    if (params.granularity) r.granularity = *params.granularity;
    if (params.pooling) r.pooling = *params.pooling;
    if (params.method != EvalMethod::Dense) {
        check_topk_rule(r.topk);
        KASCADE_CHECK(r.tile >= 1 && r.tile <= ctx, "invalid tile={} (must be in [1, {}={}])", r.tile, ctx_name, ctx);
    }
    if (params.method == EvalMethod::Quest) {
        KASCADE_CHECK(params.quest_page >= 1 && params.quest_page <= ctx, "invalid page-size={} (must be in [1, {}])",
                      params.quest_page, ctx);
    }
    if (params.method == EvalMethod::OmniKv || params.method == EvalMethod::LessIsMore) {
        // They select single keys and rank them in their own way (OmniKV: the maximum probability over all heads;
        // LessIsMore: each head's raw scores); the commands refuse --key-granularity tile and --pooling for them.
        r.granularity = KeyGranularity::Token;
        r.pooling = SparseAttentionOptions{}.pooling;
    }
    return r;
}

void check_eval_params(const LoadedModel& model, const EvalParams& params) {
    KASCADE_CHECK(params.n_tokens >= 0, "invalid eval-tokens={} (must be >= 0)", params.n_tokens);
    const bool decode = params.phase == EvalPhase::Decode;
    KASCADE_CHECK(decode || !is_decode_only_method(params.method),
                  "method {} is a decode method (it attends densely in prefill): add --phase decode",
                  mode_name(params.method));
    check_method_layers(params, model.weights.config.n_layers);
    if (decode) check_decode_counts(params.prompt_tokens, params.decode_tokens, model.weights.config.max_seq_len);
}

void check_method_layers(const EvalParams& params, int n_layers) {
    if (params.method == EvalMethod::OmniKv)
        check_omnikv_filter_layers(params.selection_layers, n_layers, "--filter-layers");
    if (params.method == EvalMethod::LessIsMore)
        check_lessismore_options(params.selection_layers, params.window_ratio, n_layers, "--selection-layers",
                                 "--window-ratio");
}

ResolvedEval resolve_eval(Workspace& ws, const LoadedModel& model, const LoadedText& text, const EvalParams& params) {
    check_eval_params(model, params);
    const bool decode = params.phase == EvalPhase::Decode;
    const int ctx = decode ? params.prompt_tokens + params.decode_tokens : params.ctx;
    ResolvedEval r = resolve_method(&ws.db(), model.model_hash, model.path.string(), params, ctx);
    r.token_offset = params.token_offset.value_or(0);
    if (r.schedule) {
        // Test tokens default to right after the calibration range of the schedule's capture, and must not overlap it.
        const CaptureRecord& capture = *r.capture;
        const int64_t calib_begin = capture.token_offset, calib_end = capture.token_offset + capture.n_tokens;
        if (!params.token_offset) r.token_offset = calib_end;
        const auto capture_text = ws.db().find_text(capture.text_id);
        if (capture_text && capture_text->hash == text.hash) {
            const int64_t end =
                params.n_tokens > 0 ? r.token_offset + params.n_tokens : static_cast<int64_t>(text.tokens.size());
            KASCADE_CHECK(end <= calib_begin || r.token_offset >= calib_end,
                          "test tokens [{}, {}) overlap the calibration tokens [{}, {}) of schedule {}'s capture on "
                          "\"{}\": choose a disjoint --offset",
                          r.token_offset, end, calib_begin, calib_end, *params.schedule_id, text.path.string());
        }
    }
    KASCADE_CHECK(r.token_offset + params.n_tokens <= static_cast<int64_t>(text.tokens.size()),
                  "test range [{}, {}) runs past the end of \"{}\" ({} tokens)", r.token_offset,
                  r.token_offset + params.n_tokens, text.path.string(), text.tokens.size());
    r.key = eval_key(r, {model.model_hash, model.tokenizer_hash, text.hash},
                     r.schedule ? r.schedule->record.key : std::string());
    return r;
}

std::string eval_key(const ResolvedEval& r, const RunInputHashes& hashes, std::string_view schedule_key) {
    const EvalParams& p = r.params;
    nlohmann::json inputs = {{"model", hashes.model}, {"tokenizer", hashes.tokenizer}, {"text", hashes.text}};
    nlohmann::json params = {{"ctx", r.ctx}, {"token_offset", r.token_offset}, {"n_tokens", p.n_tokens}};
    // Keys of prefill runs have no phase: they are those of the runs stored before decode runs existed.
    if (p.phase == EvalPhase::Decode) {
        params["phase"] = std::string(mode_name(p.phase));
        params["prompt_tokens"] = p.prompt_tokens;
        params["decode_tokens"] = p.decode_tokens;
    }
    MethodKeyInputs method = method_key_inputs(r);
    method.schedule_key = schedule_key;
    add_method_key(method, inputs, params);
    return content_key("eval", kEvalFormatVersion, inputs, params);
}

MethodKeyInputs method_key_inputs(const ResolvedEval& r) {
    const EvalParams& p = r.params;
    return {.method = p.method,
            .tile = r.tile,
            .topk = r.topk,
            .schedule_key = r.schedule ? r.schedule->record.key : "",
            .granularity = r.granularity,
            .pooling = r.pooling,
            .quest_page = p.quest_page,
            .selection_layers = p.selection_layers,
            .window_ratio = p.window_ratio,
            .matmul = p.matmul,
            .kv_dtype = p.kv_dtype};
}

void add_method_key(const MethodKeyInputs& m, nlohmann::json& inputs, nlohmann::json& params) {
    if (m.method == EvalMethod::Kascade) inputs["schedule"] = m.schedule_key;
    params["method"] = std::string(mode_name(m.method));
    if (m.method == EvalMethod::Quest) {
        params["page_size"] = m.quest_page;
        params["topk"] = topk_rule_json(m.topk);
    } else if (m.method == EvalMethod::OmniKv) {
        params["tile"] = m.tile;
        params["topk"] = topk_rule_json(m.topk);
        params["filter_layers"] = m.selection_layers;
    } else if (m.method == EvalMethod::LessIsMore) {
        params["tile"] = m.tile;
        params["topk"] = topk_rule_json(m.topk);
        params["selection_layers"] = m.selection_layers;
        params["window_ratio"] = m.window_ratio;
        params["sink_tokens"] = LessIsMoreOptions{}.sink_tokens;
    } else if (m.method != EvalMethod::Dense) {
        params["tile"] = m.tile;
        params["topk"] = topk_rule_json(m.topk);
        params["key_granularity"] = std::string(mode_name(m.granularity));
        params["pooling"] = std::string(mode_name(m.pooling));
    }
    // Exact products and an fp32 cache add nothing: every run stored before --matmul and --kv-dtype had them, and its
    // key stays its own.
    if (m.matmul != MatmulPrecision::Exact) params["matmul"] = std::string(mode_name(m.matmul));
    if (m.kv_dtype != KvDType::F32) params["kv_dtype"] = std::string(mode_name(m.kv_dtype));
}

SparseAttentionOptions eval_attention_options(const ResolvedEval& r) {
    SparseAttentionOptions options{
        .tile = r.tile, .topk = r.topk, .granularity = r.granularity, .pooling = r.pooling, .pooled_heads = false};
    if (r.schedule)
        options.pooled_heads =
            parse_mode<HeadMapMode>(r.schedule->record.head_map, "schedules.head_map") == HeadMapMode::Pooled;
    return options;
}

std::unique_ptr<AttentionPolicy> make_method_policy(const ResolvedEval& r, int n_layers) {
    const SparseAttentionOptions options = eval_attention_options(r);
    switch (r.params.method) {
        case EvalMethod::Dense:
            return std::make_unique<DenseAttention>();
        case EvalMethod::Streaming:
            return std::make_unique<StreamingAttention>(n_layers, options);
        case EvalMethod::Kascade:
        case EvalMethod::Oracle:
            return std::make_unique<KascadeAttention>(
                r.layer_plan ? *r.layer_plan : AttentionSchedule::oracle(n_layers), options);
        case EvalMethod::Quest:
            return std::make_unique<QuestAttention>(
                n_layers,
                QuestOptions{.page = r.params.quest_page, .topk = r.topk, .dense_layers = QuestOptions{}.dense_layers});
        case EvalMethod::OmniKv:
            return std::make_unique<OmniKvAttention>(
                n_layers, OmniKvOptions{.tile = r.tile, .topk = r.topk, .filter_layers = r.params.selection_layers});
        case EvalMethod::LessIsMore:
            return std::make_unique<LessIsMoreAttention>(
                n_layers, LessIsMoreOptions{.tile = r.tile,
                                            .topk = r.topk,
                                            .selection_layers = r.params.selection_layers,
                                            .window_ratio = r.params.window_ratio});
    }
    KASCADE_ASSERT(false && "unknown eval method");
    return nullptr;
}

EvalMeasurement measure_eval(const LoadedModel& model, const LoadedText& text, const ResolvedEval& r) {
    const ModelConfig& c = model.weights.config;
    const Transformer runtime(model.weights, 0, r.params.matmul);
    const std::unique_ptr<AttentionPolicy> method = make_method_policy(r, c.n_layers);
    AttentionPolicy& policy = *method;
    const bool sparse = r.params.method != EvalMethod::Dense;
    const int32_t start_token = sequence_start_token(c, model.tokenizer.get());
    const int64_t n_text = static_cast<int64_t>(text.tokens.size());

    EvalMeasurement m;
    m.started_at = utc_now();
    const double start = omp_get_wtime();
    if (r.params.phase == EvalPhase::Prefill) {
        PerplexityOptions options;
        options.ctx = r.ctx;
        options.offset = r.token_offset;
        options.max_tokens = r.params.n_tokens;
        options.kv_dtype = r.params.kv_dtype;
        const auto windows = make_windows(n_text, options, start_token >= 0, runtime.max_positions());
        ProgressLine progress(fmt::format("eval {}", mode_name(r.params.method)), static_cast<int64_t>(windows.size()),
                              "windows");
        m.perplexity = evaluate_perplexity(runtime, policy, text.tokens, start_token, options,
                                           [&](int done, const PerplexityResult&) { progress.update(done); });
        progress.finish();
        // Per-layer output error on the first window, outside the timed pass.
        if (sparse) {
            OutputErrorProbe probe(policy, c.n_layers);
            PerplexityOptions first = options;
            first.max_tokens = windows[0].end - windows[0].begin;
            evaluate_perplexity(runtime, probe, text.tokens, start_token, first);
            for (int l = 0; l < c.n_layers; ++l) m.out_rel_error.push_back(probe.relative_error(l));
        }
        m.density = policy.layer_density();
    } else {
        DecodeOptions options;
        options.prompt_tokens = r.params.prompt_tokens;
        options.decode_tokens = r.params.decode_tokens;
        options.offset = r.token_offset;
        options.max_tokens = r.params.n_tokens;
        options.kv_page_size = policy.kv_page_size();
        options.kv_dtype = r.params.kv_dtype;
        const auto windows = make_decode_windows(n_text, options, start_token >= 0, runtime.max_positions());
        ProgressLine progress(fmt::format("eval {} decode", mode_name(r.params.method)),
                              static_cast<int64_t>(windows.size()), "windows");
        m.perplexity = evaluate_decode_perplexity(runtime, policy, text.tokens, start_token, options,
                                                  [&](int done, const PerplexityResult&) { progress.update(done); });
        progress.finish();
        // Density of the timed decode steps only, then the output error over the first window's decode steps.
        m.density = policy.layer_density();
        if (sparse) {
            OutputErrorProbe probe(policy, c.n_layers);
            DecodeOptions first = options;
            first.max_tokens = windows[0].end - windows[0].begin;
            evaluate_decode_perplexity(runtime, probe, text.tokens, start_token, first);
            for (int l = 0; l < c.n_layers; ++l) m.out_rel_error.push_back(probe.relative_error(l));
        }
    }
    m.wall_s = omp_get_wtime() - start;
    for (int l = 0; l < c.n_layers; ++l) m.layer_roles.push_back(policy.layer_role(l));
    m.finished_at = utc_now();
    return m;
}

EvalResult record_eval(Workspace& ws, const LoadedModel& model, const LoadedText& text, const ResolvedEval& r,
                       const EvalMeasurement& m, const std::optional<RunMetrics>& dense, bool replace) {
    const EvalMethod method = r.params.method;
    const bool sparse = method != EvalMethod::Dense;
    const int n_layers = model.weights.config.n_layers;
    const PerplexityResult& result = m.perplexity;

    RunRecord run;
    run.key = r.key;
    run.model_id = ws.stored_id(model);
    run.text_id = ws.stored_id(text);
    if (r.schedule) run.schedule_id = r.schedule->record.id;
    run.method = std::string(mode_name(method));
    run.phase = std::string(mode_name(r.params.phase));
    if (r.params.phase == EvalPhase::Decode) {
        run.prompt_tokens = r.params.prompt_tokens;
        run.decode_tokens = r.params.decode_tokens;
    }
    set_method_columns(r, run);
    if (method == EvalMethod::Streaming) {
        run.sink_tokens = r.tile;
        if (r.topk.tiles > 0) run.window_tokens = static_cast<int64_t>(r.topk.tiles - 1) * r.tile;
    }
    if (method == EvalMethod::LessIsMore) run.sink_tokens = LessIsMoreOptions{}.sink_tokens;
    run.ctx = r.ctx;
    run.token_offset = r.token_offset;
    run.n_tokens = result.n_scored;
    run.git_commit = KASCADE_GIT_COMMIT;
    run.machine = machine_description();
    run.threads = omp_get_max_threads();
    run.started_at = m.started_at;
    run.finished_at = m.finished_at;

    RunMetrics metrics;
    metrics.n_scored = result.n_scored;
    metrics.nll_sparse = result.mean_nll();
    metrics.ppl_sparse = result.perplexity();
    if (dense) {
        metrics.nll_dense = dense->nll_sparse;
        metrics.ppl_dense = dense->ppl_sparse;
        metrics.degradation_pct = 100.0 * (metrics.ppl_sparse / *metrics.ppl_dense - 1.0);
    } else {
        metrics.nll_dense = metrics.nll_sparse;
        metrics.ppl_dense = metrics.ppl_sparse;
        metrics.degradation_pct = 0.0;
    }
    LayerDensity total;
    for (const LayerDensity& d : m.density) total.add(d);
    metrics.density = sparse ? total.ratio() : 1.0;
    metrics.tokens_per_s = result.tokens_per_second();
    std::map<LayerRole, double> ms_by_kind;
    std::vector<RunLayerRecord> layers(n_layers);
    const std::optional<AttentionSchedule>& schedule = r.layer_plan;
    for (int l = 0; l < n_layers; ++l) {
        const RunLayerRole role = m.layer_roles[l];
        const double ms = result.stats.layer_attention_ms[l] / result.n_windows;
        ms_by_kind[attention_time_kind(role)] += ms;
        layers[l].layer = l;
        layers[l].role = std::string(mode_name(role));
        if (schedule && schedule->layers[l].role == LayerRole::Reuse)
            layers[l].anchor_layer = schedule->layers[l].anchor;
        layers[l].density = sparse ? m.density[l].ratio() : 1.0;
        layers[l].attn_ms = ms;
        if (sparse) layers[l].out_rel_error = m.out_rel_error[l];
    }
    if (ms_by_kind.count(LayerRole::Dense)) metrics.attn_ms_dense = ms_by_kind[LayerRole::Dense];
    if (ms_by_kind.count(LayerRole::Anchor)) metrics.attn_ms_anchor = ms_by_kind[LayerRole::Anchor];
    if (ms_by_kind.count(LayerRole::Reuse)) metrics.attn_ms_reuse = ms_by_kind[LayerRole::Reuse];
    metrics.wall_s = m.wall_s;
    // Another process may have stored the same run meanwhile: then that run is kept and this one is a cache hit.
    const StoredRow stored = ws.db().insert_run(run, metrics, layers, replace);
    return {stored.id, !stored.inserted};
}

EvalResult run_eval(Workspace& ws, LoadedModel& model, LoadedText& text, const EvalParams& params, bool force) {
    const ResolvedEval r = resolve_eval(ws, model, text, params);
    if (!force) {
        if (const auto id = ws.db().find_run(r.key)) return {*id, true};
    }
    // Every sparse run is compared with the dense run of the same tokens, made first if it does not exist yet.
    std::optional<RunMetrics> dense;
    if (params.method != EvalMethod::Dense) dense = dense_baseline_metrics(ws, model, text, r);
    const EvalMeasurement m = measure_eval(model, text, r);
    return record_eval(ws, model, text, r, m, dense, /*replace=*/force);
}

}  // namespace kascade
