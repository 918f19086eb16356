#include "pipeline/stages/eval_stage.h"

#include <omp.h>

#include <map>

#include "base/error.h"
#include "build_info.h"
#include "io/host_info.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/output_error_probe.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/similarity_stage.h"

namespace kascade {

namespace {

constexpr int kDefaultTile = 16;

/// The parameters of a run after defaults are filled in from the schedule, its similarity and its capture.
struct ResolvedEval {
    EvalParams params;
    TopKRule topk;
    int tile = kDefaultTile;
    KeyGranularity granularity = SparseAttentionOptions{}.granularity;
    Pooling pooling = SparseAttentionOptions{}.pooling;
    int64_t token_offset = 0;
    std::optional<Schedule> schedule;
    std::string schedule_key;
};

ResolvedEval resolve(Workspace& ws, const LoadedModel& model, const LoadedText& text, const EvalParams& params) {
    static const char* const kMethods[] = {"kascade", "oracle", "streaming", "dense"};
    KASCADE_CHECK(std::find(std::begin(kMethods), std::end(kMethods), params.method) != std::end(kMethods),
                  "unknown method '{}' (expected kascade, oracle, streaming or dense)", params.method);
    KASCADE_CHECK(params.n_tokens >= 0, "invalid eval-tokens={} (must be >= 0)", params.n_tokens);
    ResolvedEval r;
    r.params = params;
    r.token_offset = params.token_offset.value_or(0);
    r.tile = params.tile.value_or(kDefaultTile);
    if (params.method == "kascade") {
        KASCADE_CHECK(params.schedule_id.has_value(), "method kascade needs --schedule ID (see `kascade status`)");
        r.schedule = ws.db().load_schedule(*params.schedule_id);
        KASCADE_CHECK(r.schedule.has_value(), "no schedule with id {} in {}", *params.schedule_id,
                      ws.db().db_file().string());
        r.schedule_key = r.schedule->record.key;
        const auto schedule_model = ws.db().find_model(r.schedule->record.model_id);
        if (!schedule_model || schedule_model->hash != model.model_hash) {
            KASCADE_FAIL("schedule {} was made for model \"{}\" (hash {}), not for \"{}\" (hash {})",
                         *params.schedule_id, schedule_model ? schedule_model->path : "?",
                         schedule_model ? schedule_model->hash : "?", model.path.string(), model.model_hash);
        }
        const auto similarity = ws.db().find_similarity(r.schedule->record.similarity_key.value_or(""));
        KASCADE_CHECK(similarity.has_value(), "schedule {} has no similarity artifact in {}", *params.schedule_id,
                      ws.db().db_file().string());
        const auto capture = ws.db().find_capture(similarity->capture_key);
        KASCADE_CHECK(capture.has_value(), "similarity {} has no capture in {}", similarity->artifact_key,
                      ws.db().db_file().string());
        // The selection the similarity measured. Artifacts made before k rules and key granularity existed were
        // tile-granular with the per-tile visible-context rule.
        const nlohmann::json sim_params =
            nlohmann::json::parse(ws.db().find_artifact(similarity->artifact_key)->params_json);
        r.topk = TopKRule{static_cast<int>(similarity->topk_tiles.value_or(0)),
                          static_cast<float>(similarity->topk_pct.value_or(0)),
                          static_cast<int>(similarity->k_min.value_or(TopKRule{}.k_min_tokens)),
                          parse_k_rule(sim_params.value("k_rule", std::string("visible")), "similarity k_rule"),
                          sim_params.value("round_k", 0)};
        r.granularity = parse_key_granularity(sim_params.value("key_granularity", std::string("tile")),
                                              "similarity key_granularity");
        if (!params.tile) r.tile = static_cast<int>(capture->tile);
        const int64_t calib_begin = capture->token_offset, calib_end = capture->token_offset + capture->n_tokens;
        if (!params.token_offset) r.token_offset = calib_end;
        const auto capture_text = ws.db().find_text(capture->text_id);
        if (capture_text && capture_text->hash == text.hash) {
            const int64_t end =
                params.n_tokens > 0 ? r.token_offset + params.n_tokens : static_cast<int64_t>(text.tokens.size());
            KASCADE_CHECK(end <= calib_begin || r.token_offset >= calib_end,
                          "test tokens [{}, {}) overlap the calibration tokens [{}, {}) of schedule {}'s capture on "
                          "\"{}\": choose a disjoint --offset",
                          r.token_offset, end, calib_begin, calib_end, *params.schedule_id, text.path.string());
        }
    }
    if (params.topk) r.topk = *params.topk;
    if (params.granularity) r.granularity = *params.granularity;
    if (params.pooling) r.pooling = *params.pooling;
    if (params.method != "dense") {
        check_topk_rule(r.topk);
        KASCADE_CHECK(r.tile >= 1 && r.tile <= params.ctx, "invalid tile={} (must be in [1, ctx={}])", r.tile,
                      params.ctx);
    }
    KASCADE_CHECK(r.token_offset + params.n_tokens <= static_cast<int64_t>(text.tokens.size()),
                  "test range [{}, {}) runs past the end of \"{}\" ({} tokens)", r.token_offset,
                  r.token_offset + params.n_tokens, text.path.string(), text.tokens.size());
    return r;
}

std::string run_key(const LoadedModel& model, const LoadedText& text, const ResolvedEval& r) {
    return eval_key({model.model_hash, model.tokenizer_hash, text.hash, r.params.method, r.params.ctx, r.token_offset,
                     r.params.n_tokens, r.tile, r.topk, r.schedule_key, r.granularity, r.pooling});
}

}  // namespace

std::string eval_key(const EvalKeyInputs& k) {
    nlohmann::json inputs = {{"model", k.model_hash}, {"tokenizer", k.tokenizer_hash}, {"text", k.text_hash}};
    nlohmann::json params = {
        {"method", k.method}, {"ctx", k.ctx}, {"token_offset", k.token_offset}, {"n_tokens", k.n_tokens}};
    if (k.method != "dense") {
        params["tile"] = k.tile;
        params["topk"] = topk_rule_json(k.topk);
        params["key_granularity"] = std::string(key_granularity_name(k.granularity));
        params["pooling"] = std::string(pooling_name(k.pooling));
    }
    if (k.method == "kascade") inputs["schedule"] = k.schedule_key;
    return content_key("eval", kEvalFormatVersion, inputs, params);
}

EvalResult run_eval(Workspace& ws, LoadedModel& model, LoadedText& text, const EvalParams& params, bool force) {
    const ResolvedEval r = resolve(ws, model, text, params);
    const std::string key = run_key(model, text, r);
    if (!force) {
        if (const auto id = ws.db().find_run(key)) return {*id, true};
    }
    const ModelConfig& c = model.weights.config;
    const Transformer runtime(model.weights);
    PerplexityOptions options;
    options.ctx = r.params.ctx;
    options.offset = r.token_offset;
    options.max_tokens = r.params.n_tokens;
    const SparseAttentionOptions sparse{
        .tile = r.tile, .topk = r.topk, .granularity = r.granularity, .pooling = r.pooling, .pooled_heads = false};

    // Every sparse run is compared with the dense run of the same tokens, made first if it does not exist yet.
    std::optional<RunMetrics> dense_metrics;
    if (r.params.method != "dense") {
        EvalParams dense_params = r.params;
        dense_params.method = "dense";
        dense_params.schedule_id.reset();
        dense_params.token_offset = r.token_offset;
        dense_params.topk.reset();
        dense_params.tile.reset();
        dense_params.granularity.reset();
        dense_params.pooling.reset();
        const EvalResult dense = run_eval(ws, model, text, dense_params);
        dense_metrics = ws.db().load_run(dense.run_id).metrics;
    }

    std::optional<AttentionSchedule> schedule;
    if (r.schedule) schedule = attention_schedule_from(*r.schedule);
    std::unique_ptr<AttentionPolicy> policy;
    KascadeAttention* kascade_policy = nullptr;
    StreamingAttention* streaming_policy = nullptr;
    if (r.params.method == "dense") {
        policy = std::make_unique<DenseAttention>();
    } else if (r.params.method == "streaming") {
        auto p = std::make_unique<StreamingAttention>(c.n_layers, sparse);
        streaming_policy = p.get();
        policy = std::move(p);
    } else {
        SparseAttentionOptions options_for_schedule = sparse;
        if (r.schedule) options_for_schedule.pooled_heads = r.schedule->record.head_map == "pooled";
        auto p = std::make_unique<KascadeAttention>(schedule.value_or(AttentionSchedule::oracle(c.n_layers)),
                                                    options_for_schedule);
        kascade_policy = p.get();
        policy = std::move(p);
    }

    const std::string started_at = utc_now();
    const double start = omp_get_wtime();
    const int32_t start_token = sequence_start_token(c, model.tokenizer.get());
    const auto windows =
        make_windows(static_cast<int64_t>(text.tokens.size()), options, start_token >= 0, runtime.max_positions());
    ProgressLine progress(fmt::format("eval {}", r.params.method), static_cast<int64_t>(windows.size()), "windows");
    const PerplexityResult result =
        evaluate_perplexity(runtime, *policy, text.tokens, start_token, options,
                            [&](int done, const PerplexityResult&) { progress.update(done); });
    progress.finish();

    // Per-layer output error on the first window, outside the timed pass.
    std::vector<double> out_error(c.n_layers, 0.0);
    if (r.params.method != "dense") {
        OutputErrorProbe probe(*policy, c.n_layers);
        PerplexityOptions first = options;
        first.max_tokens = windows[0].end - windows[0].begin;
        evaluate_perplexity(runtime, probe, text.tokens, start_token, first);
        for (int l = 0; l < c.n_layers; ++l) out_error[l] = probe.relative_error(l);
    }
    const double wall_s = omp_get_wtime() - start;

    std::vector<LayerDensity> density(c.n_layers);
    if (kascade_policy) density = kascade_policy->layer_density();
    if (streaming_policy) density = streaming_policy->layer_density();
    const int n_windows = result.n_windows;

    RunRecord run;
    run.key = key;
    run.model_id = ws.stored_id(model);
    run.text_id = ws.stored_id(text);
    if (r.params.schedule_id && r.params.method == "kascade") run.schedule_id = *r.params.schedule_id;
    run.method = r.params.method;
    if (r.params.method != "dense") {
        run.tile = r.tile;
        if (r.topk.tiles > 0) {
            run.topk_tiles = r.topk.tiles;
        } else {
            run.topk_pct = r.topk.pct;
            run.k_min = r.topk.k_min_tokens;
            run.k_rule = std::string(k_rule_name(r.topk.k_rule));
        }
        run.round_k = r.topk.round_k;
        run.key_granularity = std::string(key_granularity_name(r.granularity));
        run.pooling = std::string(pooling_name(r.pooling));
        if (r.params.method == "streaming") {
            run.sink_tokens = r.tile;
            if (r.topk.tiles > 0) run.window_tokens = static_cast<int64_t>(r.topk.tiles - 1) * r.tile;
        }
    }
    run.ctx = r.params.ctx;
    run.token_offset = r.token_offset;
    run.n_tokens = result.n_scored;
    run.git_commit = KASCADE_GIT_COMMIT;
    run.machine = machine_description();
    run.threads = omp_get_max_threads();
    run.started_at = started_at;
    run.finished_at = utc_now();

    RunMetrics metrics;
    metrics.n_scored = result.n_scored;
    metrics.nll_sparse = result.mean_nll();
    metrics.ppl_sparse = result.perplexity();
    if (dense_metrics) {
        metrics.nll_dense = dense_metrics->nll_sparse;
        metrics.ppl_dense = dense_metrics->ppl_sparse;
        metrics.degradation_pct = 100.0 * (metrics.ppl_sparse / *metrics.ppl_dense - 1.0);
    } else {
        metrics.nll_dense = metrics.nll_sparse;
        metrics.ppl_dense = metrics.ppl_sparse;
        metrics.degradation_pct = 0.0;
    }
    LayerDensity total;
    for (const LayerDensity& d : density) total.add(d);
    metrics.density = r.params.method == "dense" ? 1.0 : total.ratio();
    metrics.tokens_per_s = result.tokens_per_second();
    std::map<std::string, double> ms_by_role;
    std::vector<RunLayerRecord> layers(c.n_layers);
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string role(policy->layer_role(l));
        const double ms = result.stats.layer_attention_ms[l] / n_windows;
        ms_by_role[role == "streaming" ? "reuse" : role] += ms;
        layers[l].layer = l;
        layers[l].role = role;
        if (schedule && schedule->layers[l].role == LayerRole::Reuse)
            layers[l].anchor_layer = schedule->layers[l].anchor;
        layers[l].density = r.params.method == "dense" ? 1.0 : density[l].ratio();
        layers[l].attn_ms = ms;
        if (r.params.method != "dense") layers[l].out_rel_error = out_error[l];
    }
    if (ms_by_role.count("dense")) metrics.attn_ms_dense = ms_by_role["dense"];
    if (ms_by_role.count("anchor")) metrics.attn_ms_anchor = ms_by_role["anchor"];
    if (ms_by_role.count("reuse")) metrics.attn_ms_reuse = ms_by_role["reuse"];
    metrics.wall_s = wall_s;
    // Another process may have stored the same run meanwhile: then that run is kept and this one is a cache hit.
    const StoredRow stored = ws.db().insert_run(run, metrics, layers, /*replace=*/force);
    return {stored.id, !stored.inserted};
}

}  // namespace kascade
