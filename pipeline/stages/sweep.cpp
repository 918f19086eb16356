#include "pipeline/stages/sweep.h"

#include <omp.h>

#include <map>

#include "io/error.h"
#include "io/file_util.h"
#include "io/store/table_format.h"
#include "io/text_file.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/similarity_stage.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

std::string topk_label(const TopKRule& r) {
    std::string s = r.tiles > 0
                        ? fmt::format("topk_tiles={}", r.tiles)
                        : fmt::format("topk_pct={} k_min={} k_rule={}", r.pct, r.k_min_tokens, k_rule_name(r.k_rule));
    return r.round_k > 0 ? s + fmt::format(" round_k={}", r.round_k) : s;
}

std::string schedule_label(const ScheduleParams& p) {
    std::string s = "policy=" + p.policy;
    if (p.policy == "threshold") s += fmt::format(" threshold={} max_reuse_dist={}", p.threshold, p.max_reuse_dist);
    if (p.policy == "dp") s += fmt::format(" anchors={}", p.n_anchors);
    if (p.policy == "fixed") s += fmt::format(" anchor_list={}", nlohmann::json(p.anchor_list).dump());
    return s + fmt::format(" metric={} aggregation={} head_map={}", p.metric, p.aggregation, p.head_map);
}

/// One job of the plan, with what it needs to run.
struct PlannedJob {
    SweepJob job;
    CaptureParams capture;
    std::string capture_key;  ///< similarity: its input
    TopKRule topk;
    KeyGranularity granularity = KeyGranularity::Token;  ///< similarity
    std::string similarity_key;                          ///< schedule: its input
    ScheduleParams schedule;
    std::string schedule_key;  ///< eval kascade: its schedule
    EvalParams eval;
};

struct Hashes {
    std::string model, tokenizer, text;
};

std::vector<PlannedJob> make_plan(const SweepSpec& spec, const Hashes& h) {
    std::vector<PlannedJob> plan;
    auto eval_job = [&](const std::string& method, int ctx, int tile, const TopKRule& topk, KeyGranularity granularity,
                        Pooling pooling, const std::string& schedule_key, const std::string& label) {
        PlannedJob j;
        j.job.stage = "eval";
        j.job.label = label;
        j.eval.method = method;
        j.eval.ctx = ctx;
        j.eval.token_offset = spec.test_offset;
        j.eval.n_tokens = spec.test_tokens;
        if (method != "dense") {
            j.eval.tile = tile;
            j.eval.topk = topk;
            j.eval.granularity = granularity;
            j.eval.pooling = pooling;
        }
        j.schedule_key = schedule_key;
        j.job.key = eval_key({h.model, h.tokenizer, h.text, method, ctx, spec.test_offset, spec.test_tokens, tile, topk,
                              schedule_key, granularity, pooling});
        plan.push_back(j);
    };
    for (int ctx : spec.ctx) {
        if (std::find(spec.baselines.begin(), spec.baselines.end(), "dense") != spec.baselines.end()) {
            eval_job("dense", ctx, 0, {}, {}, {}, "", fmt::format("dense ctx={}", ctx));
        }
        for (int tile : spec.tile) {
            PlannedJob c;
            c.job.stage = "capture";
            // Token-granularity similarity recomputes the per-key mass from the captured queries and keys.
            const bool save_qk = std::find(spec.granularity.begin(), spec.granularity.end(), KeyGranularity::Token) !=
                                 spec.granularity.end();
            c.capture = CaptureParams{spec.calib_offset, spec.calib_tokens, ctx, tile, save_qk};
            c.job.label = fmt::format("ctx={} tile={} tokens [{}, {})", ctx, tile, spec.calib_offset,
                                      spec.calib_offset + spec.calib_tokens);
            c.job.key = capture_key(h.model, h.tokenizer, h.text, c.capture);
            plan.push_back(c);
            for (const TopKRule& topk : spec.topk) {
                for (KeyGranularity granularity : spec.granularity) {
                    const std::string g_label = fmt::format("key_granularity={}", key_granularity_name(granularity));
                    PlannedJob s;
                    s.job.stage = "similarity";
                    s.capture_key = c.job.key;
                    s.topk = topk;
                    s.granularity = granularity;
                    s.job.key = similarity_key(c.job.key, topk, granularity);
                    s.job.label = fmt::format("ctx={} tile={} {} {}", ctx, tile, topk_label(topk), g_label);
                    plan.push_back(s);
                    for (const ScheduleParams& params : spec.schedules) {
                        PlannedJob sc;
                        sc.job.stage = "schedule";
                        sc.similarity_key = s.job.key;
                        sc.schedule = params;
                        sc.job.key = schedule_key(s.job.key, params);
                        sc.job.label = fmt::format("{} ({})", schedule_label(params), s.job.label);
                        plan.push_back(sc);
                        for (Pooling pooling : spec.pooling)
                            eval_job("kascade", ctx, tile, topk, granularity, pooling, sc.job.key,
                                     fmt::format("kascade {} pooling={}", sc.job.label, pooling_name(pooling)));
                    }
                    for (const std::string& method : spec.baselines) {
                        if (method == "dense") continue;
                        // Streaming ranks nothing: pooling does not apply to it.
                        const std::vector<Pooling> poolings =
                            method == "oracle" ? spec.pooling : std::vector<Pooling>{SparseAttentionOptions{}.pooling};
                        for (Pooling pooling : poolings)
                            eval_job(method, ctx, tile, topk, granularity, pooling, "",
                                     fmt::format("{} ({}) pooling={}", method, s.job.label, pooling_name(pooling)));
                    }
                }
            }
        }
    }
    return plan;
}

/// Marks the jobs the stages would reuse: a row with the job's key, and for artifacts their file in place (what
/// Workspace::has_artifact checks). Read-only; no database is created.
void mark_stored(const fs::path& results_dir, std::vector<PlannedJob>& plan) {
    const fs::path db_file = results_dir / ResultsDb::kFileName;
    if (!fs::exists(db_file)) return;
    QueryDb db(db_file);
    for (PlannedJob& j : plan) {
        const std::string& key = j.job.key;
        if (j.job.stage == "eval") {
            j.job.stored = !db.select("SELECT 1 FROM runs WHERE key = '" + key + "'").rows.empty();
        } else if (j.job.stage == "schedule") {
            j.job.stored = !db.select("SELECT 1 FROM schedules WHERE key = '" + key + "'").rows.empty();
        } else {
            const QueryResult row = db.select("SELECT path FROM artifacts WHERE key = '" + key + "'");
            j.job.stored = !row.rows.empty() && fs::exists(results_dir / std::get<std::string>(row.rows[0][0]));
        }
    }
}

}  // namespace

SweepReport run_sweep(const fs::path& results_dir, const SweepSpec& spec, bool dry_run, std::FILE* log) {
    const fs::path tokenizer = spec.tokenizer.empty() ? find_tokenizer_for_model(spec.model) : fs::path(spec.tokenizer);
    KASCADE_CHECK(fs::exists(spec.model), "{}: model.path \"{}\" does not exist", spec.file.string(), spec.model);
    KASCADE_CHECK(!tokenizer.empty() && fs::exists(tokenizer),
                  "{}: no tokenizer for model \"{}\" (set model.tokenizer)", spec.file.string(), spec.model);
    const Hashes hashes{model_content_hash(spec.model), hash_file_hex(tokenizer), hash_hex(read_text_file(spec.text))};
    std::vector<PlannedJob> plan = make_plan(spec, hashes);
    mark_stored(results_dir, plan);

    SweepReport report;
    for (const PlannedJob& j : plan) report.jobs.push_back(j.job);
    const int n_jobs = static_cast<int>(plan.size());
    int to_compute = 0;
    for (const PlannedJob& j : plan) to_compute += j.job.stored ? 0 : 1;
    std::fprintf(log, "sweep %s: %d jobs, %d stored, %d to compute (results in %s)\n", spec.file.c_str(), n_jobs,
                 n_jobs - to_compute, to_compute, results_dir.c_str());
    if (dry_run) {
        for (int i = 0; i < n_jobs; ++i) {
            std::fprintf(log, "[%3d/%d] %-10s %-7s %s\n", i + 1, n_jobs, plan[i].job.stage.c_str(),
                         plan[i].job.stored ? "stored" : "run", plan[i].job.label.c_str());
        }
        return report;
    }

    Workspace ws(results_dir);
    LoadedModel& model = ws.model(spec.model, tokenizer);
    LoadedText& text = ws.text(spec.text, model);
    KASCADE_ASSERT(model.model_hash == hashes.model && text.hash == hashes.text);
    std::map<std::string, int64_t> schedule_ids;  // by key
    ProgressLine progress("sweep", to_compute, "jobs");
    const double sweep_start = omp_get_wtime();
    int done_computing = 0;
    for (int i = 0; i < n_jobs; ++i) {
        PlannedJob& j = plan[i];
        const double start = omp_get_wtime();
        bool cached = false;
        std::string outcome;
        if (j.job.stage == "capture") {
            const StageResult r = run_capture(ws, model, text, j.capture);
            KASCADE_ASSERT(r.key == j.job.key);
            cached = r.cached;
        } else if (j.job.stage == "similarity") {
            const StageResult r = run_similarity(ws, j.capture_key, j.topk, j.granularity);
            KASCADE_ASSERT(r.key == j.job.key);
            cached = r.cached;
        } else if (j.job.stage == "schedule") {
            const ScheduleResult r = run_schedule(ws, j.similarity_key, j.schedule);
            KASCADE_ASSERT(r.key == j.job.key);
            schedule_ids[r.key] = r.id;
            cached = r.cached;
            const auto s = ws.db().load_schedule(r.id);
            outcome = fmt::format("schedule {}: {} anchors, {} reuse", r.id, s->record.n_anchor_layers,
                                  s->record.n_reuse_layers);
        } else {
            if (j.eval.method == "kascade") j.eval.schedule_id = schedule_ids.at(j.schedule_key);
            const EvalResult r = run_eval(ws, model, text, j.eval);
            KASCADE_ASSERT(ws.db().load_run(r.run_id).run.key == j.job.key);
            cached = r.cached;
            report.run_ids.push_back(r.run_id);
            const RunMetrics m = ws.db().load_run(r.run_id).metrics;
            outcome = fmt::format("run {}: ppl {:.4f} ({:+.2f}%) density {:.3f}", r.run_id, m.ppl_sparse,
                                  m.degradation_pct.value_or(0), m.density);
        }
        if (!cached) {
            ++report.computed;
            ++done_computing;
        }
        progress.finish();
        std::fprintf(log, "[%3d/%d] %-10s %-8s %s%s%s  (%.1f s)\n", i + 1, n_jobs, j.job.stage.c_str(),
                     cached ? "stored" : "computed", j.job.label.c_str(), outcome.empty() ? "" : "  -> ",
                     outcome.c_str(), omp_get_wtime() - start);
        std::fflush(log);
        progress.update(done_computing);
    }
    progress.finish();
    std::fprintf(log, "sweep done: %d jobs computed, %d reused, %.1f s\n", report.computed, n_jobs - report.computed,
                 omp_get_wtime() - sweep_start);
    return report;
}

}  // namespace kascade
