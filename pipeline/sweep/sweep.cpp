#include "pipeline/sweep/sweep.h"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <set>

#include <fmt/ranges.h>

#include "base/error.h"
#include "io/file_util.h"
#include "io/host_info.h"
#include "io/store/results_merge.h"
#include "io/text_file.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/omnikv_attention.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/stages/content_key.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

std::string topk_label(const TopKRule& r) {
    std::string s = r.tiles > 0
                        ? fmt::format("topk_tiles={}", r.tiles)
                        : fmt::format("topk_pct={} k_min={} k_rule={}", r.pct, r.k_min_tokens, mode_name(r.k_rule));
    return r.round_k > 0 ? s + fmt::format(" round_k={}", r.round_k) : s;
}

std::string schedule_label(const ScheduleParams& p) {
    std::string s = fmt::format("policy={}", mode_name(p.policy));
    if (p.policy == SchedulePolicy::Threshold)
        s += fmt::format(" threshold={} max_reuse_dist={}", p.threshold, p.max_reuse_dist);
    if (p.policy == SchedulePolicy::Dp) s += fmt::format(" anchors={}", p.n_anchors);
    if (p.policy == SchedulePolicy::Fixed) s += fmt::format(" anchor_list={}", nlohmann::json(p.anchor_list).dump());
    return s + fmt::format(" metric={} aggregation={} head_map={}", mode_name(p.metric), mode_name(p.aggregation),
                           mode_name(p.head_map));
}

/// What a [datasets] dataset's runs are keyed by, read once from its files when the sweep is planned.
struct DatasetFacts {
    std::string name;
    DatasetRunFiles files;
};

struct Hashes {
    std::string model, tokenizer, text;
    std::string haystack;                ///< [task] haystack; empty: the filler
    std::vector<DatasetFacts> datasets;  ///< [datasets], in the order of datasets.names
};

/// The layer list [baselines] gives `method` (OmniKV's filter layers, LessIsMore's selection layers; none for the
/// others).
std::vector<int> method_layers(const SweepSpec& spec, EvalMethod method) {
    if (method == EvalMethod::OmniKv) return spec.omnikv_filter_layers;
    if (method == EvalMethod::LessIsMore) return spec.lessismore_selection_layers;
    return {};
}

/// Whether the method selects single keys in its own way (no key granularity or pooling).
bool ranks_own_keys(EvalMethod method) {
    return method == EvalMethod::OmniKv || method == EvalMethod::LessIsMore;
}

/// One method configuration of the grid: what the method runs with, the schedule job it reads (Kascade; -1 for
/// the others) and its log label. A field the method does not use keeps its value-initialised default, which its
/// keys hash.
struct MethodConfig {
    EvalMethod method = EvalMethod::Dense;
    int tile = 0;
    TopKRule topk{};
    KeyGranularity granularity{};
    Pooling pooling{};
    int schedule_job = -1;
    std::string label;
};

/// The method part of a task job's parameters (generated prompts or a dataset) for one method configuration.
void set_task_method(const SweepSpec& spec, const MethodConfig& c, EvalParams& m) {
    m.method = c.method;
    m.matmul = spec.matmul;
    m.kv_dtype = spec.kv_dtype;
    if (c.method == EvalMethod::Dense) return;
    m.tile = c.tile;
    m.topk = c.topk;
    if (!ranks_own_keys(c.method)) {
        m.granularity = c.granularity;
        m.pooling = c.pooling;
    }
    m.quest_page = spec.quest_page;
    m.selection_layers = method_layers(spec, c.method);
    m.window_ratio = spec.lessismore_window_ratio;
}

/// A job's method parameters (params) as resolve_method will resolve them: the configuration's tile, top-k rule,
/// granularity and pooling.
ResolvedEval planned_method(const MethodConfig& c, const EvalParams& params) {
    ResolvedEval planned;
    planned.params = params;
    planned.tile = c.tile;
    planned.topk = c.topk;
    planned.granularity = c.granularity;
    planned.pooling = c.pooling;
    return planned;
}

/// The method part of a task job's content key: its method parameters (set_task_method) as planned, and the key of
/// its schedule job.
MethodKeyInputs planned_method_key(const MethodConfig& c, const EvalParams& method, const std::string& schedule_key) {
    MethodKeyInputs key = method_key_inputs(planned_method(c, method));
    key.schedule_key = schedule_key;
    return key;
}

/// Whether the plan has a job with `key` already.
bool has_job_key(const std::vector<SweepJob>& plan, const std::string& key) {
    return std::any_of(plan.begin(), plan.end(), [&](const SweepJob& o) { return o.key == key; });
}

/// Adds a task job per task x prefill of [task] for one method configuration, unless the plan has its key already
/// (a task run does not depend on ctx, and dense or quest runs are one prefill mode).
void add_task_jobs(const SweepSpec& spec, const Hashes& h, const MethodConfig& c, std::vector<SweepJob>& plan) {
    const SweepTaskSpec& t = *spec.task;
    for (TaskKind kind : t.tasks) {
        for (TaskPrefill requested : t.prefills) {
            SweepJob j;
            j.stage = "task";
            j.task = t.params(kind);
            TaskParams& p = j.task;
            p.prefill = effective_task_prefill(c.method, requested);
            set_task_method(spec, c, p.method);
            if (c.schedule_job >= 0) {
                j.schedule_key = plan[c.schedule_job].key;
                j.depends_on = {c.schedule_job};
            }
            j.key = task_key({.model_hash = h.model,
                              .tokenizer_hash = h.tokenizer,
                              .haystack_hash = h.haystack,
                              .task = kind,
                              .seed = t.seed,
                              .max_new_tokens = t.max_new_tokens.value_or(task_defaults(kind).max_new_tokens),
                              .prefill = p.prefill,
                              .method_key = planned_method_key(c, p.method, j.schedule_key)});
            if (has_job_key(plan, j.key)) continue;
            j.task_grid = task_grid_json(p);
            j.label = fmt::format("{} {} prefill={}", mode_name(kind), c.label, mode_name(p.prefill));
            plan.push_back(j);
        }
    }
}

/// Adds a dataset task job per dataset x prefill of [datasets] for one method configuration, as add_task_jobs.
void add_dataset_jobs(const SweepSpec& spec, const Hashes& h, const MethodConfig& c, std::vector<SweepJob>& plan) {
    const SweepDatasetSpec& d = *spec.datasets;
    for (const DatasetFacts& facts : h.datasets) {
        for (TaskPrefill requested : d.prefills) {
            SweepJob j;
            j.stage = "task";
            j.dataset = d.params(facts.name);
            DatasetTaskParams& p = j.dataset;
            p.prefill = effective_task_prefill(c.method, requested);
            set_task_method(spec, c, p.method);
            if (c.schedule_job >= 0) {
                j.schedule_key = plan[c.schedule_job].key;
                j.depends_on = {c.schedule_job};
            }
            j.key = dataset_task_key({.model_hash = h.model,
                                      .tokenizer_hash = h.tokenizer,
                                      .dataset_hash = facts.files.dataset_text.hash,
                                      .prompt_template = facts.files.prompt_template,
                                      .dataset_name = facts.name,
                                      .metric = facts.files.scoring.metric,
                                      .max_length = d.max_length,
                                      .max_new_tokens = facts.files.max_new_tokens,
                                      .chat_template = facts.files.chat_template,
                                      .prefill = p.prefill,
                                      .method_key = planned_method_key(c, p.method, j.schedule_key)});
            if (has_job_key(plan, j.key)) continue;
            j.task_grid = dataset_grid_json(static_cast<int>(facts.files.samples.size()));
            j.label = fmt::format("dataset {} {} prefill={}", facts.name, c.label, mode_name(p.prefill));
            plan.push_back(j);
        }
    }
}

/// The jobs of one grid.ctx share its dense eval: every sparse eval compares with the dense run of its tokens, so
/// it waits for that job (none when the sweep has no dense eval).
struct CtxJobs {
    int ctx = 0;
    std::vector<int> dense_dep;
};

/// Expands a sweep's grid into its jobs, in the order the plan (and its key) lists them: the dense task runs, then
/// per ctx its dense eval and, per tile, the chain capture -> similarity -> schedule -> Kascade runs, each
/// similarity followed by the baselines at its top-k rule.
class JobPlanner {
  public:
    JobPlanner(const SweepSpec& spec, const Hashes& h) : spec_(spec), h_(h) {}

    std::vector<SweepJob> plan() && {
        const bool has_dense =
            std::find(spec_.baselines.begin(), spec_.baselines.end(), EvalMethod::Dense) != spec_.baselines.end();
        const MethodConfig dense{.label = "dense"};
        if (has_dense && spec_.task) add_task_jobs(spec_, h_, dense, jobs_);
        if (has_dense && spec_.datasets) add_dataset_jobs(spec_, h_, dense, jobs_);
        for (int ctx : spec_.ctx) {
            CtxJobs at{ctx, {}};
            if (has_dense && spec_.perplexity) {
                const int dense_job = add_dense_eval(at);
                at.dense_dep = {dense_job};
            }
            for (int tile : spec_.tile) add_capture_chain(at, tile);
        }
        return std::move(jobs_);
    }

  private:
    int add(SweepJob job) {
        jobs_.push_back(std::move(job));
        return static_cast<int>(jobs_.size()) - 1;
    }

    /// The dense eval of a ctx (its task runs are planned once, before every ctx); returns its index.
    int add_dense_eval(const CtxJobs& at) {
        add_method_jobs(at, {.label = spec_.phase == EvalPhase::Decode
                                          ? fmt::format("dense decode prompt_tokens={} decode_tokens={}",
                                                        spec_.prompt_tokens, spec_.decode_tokens)
                                          : fmt::format("dense ctx={}", at.ctx)});
        return static_cast<int>(jobs_.size()) - 1;
    }

    /// A capture at (ctx, tile) and, per top-k rule x key granularity, what reads it.
    void add_capture_chain(const CtxJobs& at, int tile) {
        SweepJob c;
        c.stage = "capture";
        // Token-granularity similarity recomputes the per-key mass from the captured queries and keys.
        const bool save_qk = std::find(spec_.granularity.begin(), spec_.granularity.end(), KeyGranularity::Token) !=
                             spec_.granularity.end();
        c.capture = CaptureParams{spec_.calib_offset, spec_.calib_tokens, at.ctx, tile, save_qk};
        c.label = fmt::format("ctx={} tile={} tokens [{}, {})", at.ctx, tile, spec_.calib_offset,
                              spec_.calib_offset + spec_.calib_tokens);
        c.key = capture_key(h_.model, h_.tokenizer, h_.text, c.capture);
        const int capture_job = add(c);
        for (const TopKRule& topk : spec_.topk)
            for (KeyGranularity granularity : spec_.granularity)
                add_similarity_chain(at, tile, capture_job, topk, granularity);
    }

    /// A similarity of a capture, its schedules with their Kascade runs, then the baselines at its top-k rule.
    void add_similarity_chain(const CtxJobs& at, int tile, int capture_job, const TopKRule& topk,
                              KeyGranularity granularity) {
        SweepJob s;
        s.stage = "similarity";
        s.capture_key = jobs_[capture_job].key;
        s.topk = topk;
        s.granularity = granularity;
        s.key = similarity_key(s.capture_key, topk, granularity);
        s.label =
            fmt::format("ctx={} tile={} {} key_granularity={}", at.ctx, tile, topk_label(topk), mode_name(granularity));
        s.depends_on = {capture_job};
        const int similarity_job = add(s);
        for (const ScheduleParams& params : spec_.schedules) {
            SweepJob sc;
            sc.stage = "schedule";
            sc.similarity_key = s.key;
            sc.schedule = params;
            sc.key = schedule_key(s.key, params);
            sc.label = fmt::format("{} ({})", schedule_label(params), s.label);
            sc.depends_on = {similarity_job};
            const int schedule_job = add(sc);
            for (Pooling pooling : spec_.pooling) {
                add_method_jobs(at, {EvalMethod::Kascade, tile, topk, granularity, pooling, schedule_job,
                                     fmt::format("kascade {} pooling={}", sc.label, mode_name(pooling))});
            }
        }
        add_baseline_jobs(at, tile, topk, granularity, s.label);
    }

    /// The sparse baselines at one (tile, top-k rule, key granularity); `similarity_label` names that setting.
    void add_baseline_jobs(const CtxJobs& at, int tile, const TopKRule& topk, KeyGranularity granularity,
                           const std::string& similarity_label) {
        for (EvalMethod method : spec_.baselines) {
            if (method == EvalMethod::Dense) continue;
            // Quest has no tile, key granularity or pooling: one job per top-k rule.
            if (method == EvalMethod::Quest) {
                if (tile == spec_.tile.front() && granularity == spec_.granularity.front())
                    add_method_jobs(at, {method,
                                         tile,
                                         topk,
                                         granularity,
                                         {},
                                         -1,
                                         fmt::format("quest ({}) page_size={}", topk_label(topk), spec_.quest_page)});
                continue;
            }
            // OmniKV and LessIsMore select single keys in their own way: one job per tile x top-k rule.
            if (ranks_own_keys(method)) {
                if (granularity == spec_.granularity.front()) {
                    std::string label =
                        fmt::format("{} (ctx={} tile={} {}) layers={}", mode_name(method), at.ctx, tile,
                                    topk_label(topk), nlohmann::json(method_layers(spec_, method)).dump());
                    if (method == EvalMethod::LessIsMore)
                        label += fmt::format(" window_ratio={}", spec_.lessismore_window_ratio);
                    add_method_jobs(at, {method, tile, topk, KeyGranularity::Token, {}, -1, label});
                }
                continue;
            }
            // Streaming ranks nothing: pooling does not apply to it.
            const std::vector<Pooling> poolings =
                method == EvalMethod::Oracle ? spec_.pooling : std::vector<Pooling>{SparseAttentionOptions{}.pooling};
            for (Pooling pooling : poolings) {
                add_method_jobs(
                    at, {method, tile, topk, granularity, pooling, -1,
                         fmt::format("{} ({}) pooling={}", mode_name(method), similarity_label, mode_name(pooling))});
            }
        }
    }

    /// A method configuration's jobs: its task runs ([task], [datasets]) and its perplexity run (eval).
    void add_method_jobs(const CtxJobs& at, const MethodConfig& c) {
        if (spec_.task) add_task_jobs(spec_, h_, c, jobs_);
        if (spec_.datasets) add_dataset_jobs(spec_, h_, c, jobs_);
        if (spec_.perplexity) add(eval_job(at, c));
    }

    SweepJob eval_job(const CtxJobs& at, const MethodConfig& c) const {
        SweepJob j;
        j.stage = "eval";
        j.label = c.label;
        j.eval.method = c.method;
        j.eval.ctx = at.ctx;
        j.eval.token_offset = spec_.test_offset;
        j.eval.n_tokens = spec_.test_tokens;
        j.eval.phase = spec_.phase;
        j.eval.prompt_tokens = spec_.prompt_tokens;
        j.eval.decode_tokens = spec_.decode_tokens;
        j.eval.quest_page = spec_.quest_page;
        j.eval.selection_layers = method_layers(spec_, c.method);
        j.eval.window_ratio = spec_.lessismore_window_ratio;
        j.eval.matmul = spec_.matmul;
        j.eval.kv_dtype = spec_.kv_dtype;
        j.depends_on = at.dense_dep;
        if (c.method != EvalMethod::Dense) {
            j.eval.tile = c.tile;
            j.eval.topk = c.topk;
            if (!ranks_own_keys(c.method)) {
                j.eval.granularity = c.granularity;
                j.eval.pooling = c.pooling;
            }
        }
        if (c.schedule_job >= 0) {
            j.schedule_key = jobs_[c.schedule_job].key;
            j.depends_on.push_back(c.schedule_job);
        }
        j.key = eval_key(planned_eval(at, c, j.eval), {h_.model, h_.tokenizer, h_.text}, j.schedule_key);
        return j;
    }

    /// The eval as it will be resolved when it runs, for its key.
    ResolvedEval planned_eval(const CtxJobs& at, const MethodConfig& c, const EvalParams& params) const {
        ResolvedEval planned = planned_method(c, params);
        planned.token_offset = spec_.test_offset;
        // A decode run's windows are prompt + decode tokens long, whatever the calibration's ctx.
        planned.ctx = spec_.phase == EvalPhase::Decode ? spec_.prompt_tokens + spec_.decode_tokens : at.ctx;
        return planned;
    }

    const SweepSpec& spec_;
    const Hashes& h_;
    std::vector<SweepJob> jobs_;
};

std::vector<SweepJob> make_jobs(const SweepSpec& spec, const Hashes& h) {
    return JobPlanner(spec, h).plan();
}

void check_plan_key(const SweepSpec& spec, const SweepPlan& plan, const SweepOptions& options) {
    KASCADE_CHECK(options.expected_key.empty() || options.expected_key == plan.key,
                  "{}: the sweep's jobs are now {} (key {}), not the ones submitted (key {}): the sweep file or its "
                  "model or text changed since; submit it again",
                  spec.file.string(), plan.jobs.size(), plan.key, options.expected_key);
}

void check_job_index(const SweepSpec& spec, const SweepPlan& plan, int index) {
    KASCADE_CHECK(index >= 0 && index < static_cast<int>(plan.jobs.size()),
                  "--job-index {} is out of range: {} has jobs 0..{}", index, spec.file.string(), plan.jobs.size() - 1);
}

/// Runs plan job `index` alone: in the results folder, or in its own shard after importing its inputs there.
SweepReport run_one_job(const fs::path& results_dir, const SweepSpec& spec, SweepPlan& plan,
                        const SweepOptions& options, std::FILE* log) {
    const int index = *options.job_index;
    check_job_index(spec, plan, index);
    const SweepJob& job = plan.jobs[index];
    SweepReport report;
    report.key = plan.key;
    if (job.stored) {
        std::fprintf(log, "%s\n", job_log_line(plan, index, {true, "stored in " + results_dir.string()}, 0).c_str());
        report.jobs = plan.jobs;
        return report;
    }
    const bool sharded = !options.shard_dir.empty();
    const fs::path work_dir = sharded ? job_shard_dir(options.shard_dir, plan, index) : results_dir;
    // A shard holds everything its job reads: each input comes from the shard of the job that made it (in this
    // submission) or from the results folder (made before). Every input file is verified before the shard is made,
    // so a missing or damaged one fails the task, naming it, and leaves no shard behind.
    std::vector<std::pair<std::unique_ptr<ResultsDb>, std::set<std::string>>> imports;
    if (sharded) {
        for (int dep : job.depends_on) {
            const fs::path dep_shard = job_shard_dir(options.shard_dir, plan, dep);
            const fs::path source = fs::exists(dep_shard / ResultsDb::kFileName) ? dep_shard : results_dir;
            if (!fs::exists(source / ResultsDb::kFileName)) continue;
            imports.emplace_back(std::make_unique<ResultsDb>(source, DbAccess::ReadOnly),
                                 std::set<std::string>{plan.jobs[dep].key});
        }
        std::unique_ptr<ResultsDb> existing;
        if (fs::exists(work_dir / ResultsDb::kFileName))
            existing = std::make_unique<ResultsDb>(work_dir, DbAccess::ReadOnly);
        std::set<std::string> taken;
        std::vector<std::string> problems;
        for (auto& [from, keys] : imports) {
            for (std::string& p : check_merge_files(*from, work_dir, existing.get(), taken, &keys))
                problems.push_back(std::move(p));
        }
        KASCADE_CHECK(problems.empty(), "job {} ({} {}) cannot import its inputs into {}: {}", index, job.stage,
                      job.label, work_dir.string(), fmt::join(problems, "; "));
    }
    Workspace ws(work_dir);
    record_sweep(ws.db(), spec, plan);
    for (auto& [from, keys] : imports) merge_results(*from, ws.db(), &keys);
    for (int dep : job.depends_on) {
        const SweepJob& input = plan.jobs[dep];
        KASCADE_CHECK(job_output_stored(ws.db(), input.stage, input.key, input.task_grid),
                      "job {} ({} {}) needs job {} ({} {}), which is not stored in {}: it failed or was cancelled; "
                      "run the sweep again to retry the missing jobs",
                      index, job.stage, job.label, dep, input.stage, input.label, results_dir.string());
    }
    LoadedModel& model = ws.model(plan.model, plan.tokenizer);
    LoadedText& text = ws.text(plan.text, model);
    const double start = omp_get_wtime();
    JobOutcome outcome;
    try {
        outcome = run_sweep_job(ws, model, text, job, options.force);
    } catch (const std::exception& e) {
        record_job_failure(ws.db(), plan, index, e.what());
        throw;
    }
    report.computed = outcome.cached ? 0 : 1;
    std::fprintf(log, "%s\n", job_log_line(plan, index, outcome, omp_get_wtime() - start).c_str());
    report.jobs = plan.jobs;
    return report;
}

/// The id of the schedule a kascade eval or task job runs with (stored by the schedule job it depends on).
int64_t stored_schedule_id(Workspace& ws, const std::string& schedule_key, const std::string& label) {
    const std::optional<Schedule> schedule = ws.db().find_schedule(schedule_key);
    KASCADE_CHECK(schedule.has_value(), "schedule {} of job \"{}\" is not stored in {}", schedule_key, label,
                  ws.results_dir().string());
    return schedule->record.id;
}

}  // namespace

SweepPlan plan_sweep(const SweepSpec& spec) {
    const fs::path tokenizer = spec.tokenizer.empty() ? find_tokenizer_for_model(spec.model) : fs::path(spec.tokenizer);
    KASCADE_CHECK(fs::exists(spec.model), "{}: model.path \"{}\" does not exist", spec.file.string(), spec.model);
    KASCADE_CHECK(!tokenizer.empty() && fs::exists(tokenizer),
                  "{}: no tokenizer for model \"{}\" (set model.tokenizer)", spec.file.string(), spec.model);
    const std::unique_ptr<Tokenizer> tokenizer_files = load_tokenizer(tokenizer);
    Hashes hashes{model_content_hash(spec.model),
                  tokenizer_content_hash(tokenizer, *tokenizer_files),
                  hash_hex(read_text_file(spec.text)),
                  "",
                  {}};
    if (spec.datasets) {
        for (const std::string& name : spec.datasets->names) {
            try {
                hashes.datasets.push_back(
                    {name, read_dataset_run_files(spec.datasets->params(name), *tokenizer_files)});
            } catch (const Error& e) {
                KASCADE_FAIL("{}: [datasets] {}: {}", spec.file.string(), name, e.what());
            }
        }
    }
    if (spec.task && !spec.task->haystack.empty()) {
        KASCADE_CHECK(fs::exists(spec.task->haystack), "{}: task.haystack \"{}\" does not exist", spec.file.string(),
                      spec.task->haystack);
        hashes.haystack = hash_file_hex(spec.task->haystack);
    }
    SweepPlan plan;
    plan.model = spec.model;
    plan.tokenizer = tokenizer;
    plan.text = spec.text;
    plan.jobs = make_jobs(spec, hashes);
    std::vector<std::string> keys;
    for (const SweepJob& j : plan.jobs) keys.push_back(j.key);
    plan.key = content_key("sweep", 1, {{"jobs", keys}}, nlohmann::json::object());
    return plan;
}

void check_sweep_inputs(const SweepSpec& spec, const LoadedModel& model, const LoadedText& text) {
    const std::string file = spec.file.string();
    const ModelConfig& c = model.weights.config;
    for (int ctx : spec.ctx) {
        KASCADE_CHECK(ctx <= c.max_seq_len, "{}: grid.ctx = {}: model \"{}\" has a context of {} positions", file, ctx,
                      model.path.string(), c.max_seq_len);
    }
    const auto n_text = static_cast<int64_t>(text.tokens.size());
    KASCADE_CHECK(spec.calib_offset + spec.calib_tokens <= n_text,
                  "{}: calibration.offset = {} + calibration.tokens = {} runs past the end of text \"{}\" ({} tokens)",
                  file, spec.calib_offset, spec.calib_tokens, text.path.string(), n_text);
    KASCADE_CHECK(!spec.perplexity || spec.test_offset + spec.test_tokens <= n_text,
                  "{}: test.offset = {}{} + test.tokens = {} runs past the end of text \"{}\" ({} tokens)", file,
                  spec.test_offset, spec.test_offset_given ? "" : " (after the calibration range)", spec.test_tokens,
                  text.path.string(), n_text);
    if (spec.perplexity) {
        // The eval stage's own checks of what its runs take from the file (the decode window within the model's
        // context, ...), so that a sweep whose evals would all fail is refused before anything is written.
        EvalParams eval;
        eval.method = EvalMethod::Dense;
        eval.n_tokens = spec.test_tokens;
        eval.phase = spec.phase;
        eval.prompt_tokens = spec.prompt_tokens;
        eval.decode_tokens = spec.decode_tokens;
        try {
            check_eval_params(model, eval);
        } catch (const Error& e) {
            KASCADE_FAIL("{}: [test] {}", file, e.what());
        }
    }
    // A capture uses whole windows of ctx - 1 text tokens after a BOS (ctx without one).
    const bool has_bos = sequence_start_token(c, model.tokenizer.get()) >= 0;
    for (int ctx : spec.ctx) {
        const int64_t window = has_bos ? ctx - 1 : ctx;
        KASCADE_CHECK(spec.calib_tokens >= window,
                      "{}: calibration.tokens = {} is less than one window of {} tokens at grid.ctx = {}", file,
                      spec.calib_tokens, window, ctx);
    }
    const std::string layers = fmt::format("the model has {} layers (0..{})", c.n_layers, c.n_layers - 1);
    for (size_t i = 0; i < spec.schedules.size(); ++i) {
        const ScheduleParams& p = spec.schedules[i];
        const int table = spec.schedule_tables.at(i);
        if (p.policy == SchedulePolicy::Dp) {
            KASCADE_CHECK(p.n_anchors <= c.n_layers, "{}: schedules[{}].anchors = {}: {}", file, table, p.n_anchors,
                          layers);
        } else if (p.policy == SchedulePolicy::Fixed) {
            const std::string list = fmt::format("[{}]", fmt::join(p.anchor_list, ", "));
            KASCADE_CHECK(p.anchor_list.front() == 0, "{}: schedules[{}].anchor_list = {} must start with layer 0",
                          file, table, list);
            for (size_t k = 1; k < p.anchor_list.size(); ++k) {
                KASCADE_CHECK(p.anchor_list[k] > p.anchor_list[k - 1],
                              "{}: schedules[{}].anchor_list = {} must be increasing", file, table, list);
            }
            KASCADE_CHECK(p.anchor_list.back() < c.n_layers, "{}: schedules[{}].anchor_list = {}: {}", file, table,
                          list, layers);
        }
    }
    // OmniKV's and LessIsMore's layers within the model (the policies' own checks, naming the sweep keys).
    try {
        if (!spec.omnikv_filter_layers.empty())
            check_omnikv_filter_layers(spec.omnikv_filter_layers, c.n_layers, "baselines.omnikv_filter_layers");
        if (!spec.lessismore_selection_layers.empty())
            check_lessismore_options(spec.lessismore_selection_layers, spec.lessismore_window_ratio, c.n_layers,
                                     "baselines.lessismore_selection_layers", "baselines.lessismore_window_ratio");
    } catch (const Error& e) {
        KASCADE_FAIL("{}: {}", file, e.what());
    }
    if (spec.datasets) {
        // Each dataset's prompts must fit the model's context with their answers: the stage's own checks.
        for (const std::string& name : spec.datasets->names) {
            try {
                resolve_dataset_task(nullptr, model, spec.datasets->params(name));
            } catch (const Error& e) {
                KASCADE_FAIL("{}: [datasets] {}: {}", file, name, e.what());
            }
        }
    }
    if (spec.task) {
        // Each task's prompts must fit the model's context with their answer, and the shortest must hold the
        // instruction, needles and question: the task stage's own checks, run once per task before any job.
        for (TaskKind kind : spec.task->tasks) {
            try {
                resolve_task(nullptr, model, spec.task->params(kind));  // the prompts' checks, whatever the method
            } catch (const Error& e) {
                KASCADE_FAIL("{}: [task] {}: {}", file, mode_name(kind), e.what());
            }
        }
    }
}

void check_sweep_inputs(const SweepSpec& spec, const SweepPlan& plan) {
    const std::unique_ptr<LoadedModel> model = load_model_and_tokenizer(plan.model, plan.tokenizer);
    const std::unique_ptr<LoadedText> text = load_corpus_text(plan.text, *model);
    check_sweep_inputs(spec, *model, *text);
}

std::string dataset_grid_json(int samples) {
    return nlohmann::json{{"dataset_samples", samples}}.dump();
}

std::string task_grid_json(const TaskParams& p) {
    return nlohmann::json{{"lengths", p.lengths}, {"depths_pct", p.depths_pct}, {"samples", p.samples}}.dump();
}

bool job_output_stored(ResultsDb& db, std::string_view stage, std::string_view key, std::string_view task_grid) {
    if (stage == "eval") return db.find_run(key).has_value();
    if (stage == "task") {
        const nlohmann::json grid = nlohmann::json::parse(task_grid);
        if (grid.contains("dataset_samples"))
            return dataset_samples_stored(db, key, grid["dataset_samples"].get<int>());
        return task_grid_stored(db, key, grid.at("lengths").get<std::vector<int>>(),
                                grid.at("depths_pct").get<std::vector<double>>(), grid.at("samples").get<int>());
    }
    // A schedule is stored as a row and an artifact file: a deleted file is computed again, like any artifact's.
    if (stage == "schedule" && !db.find_schedule(key)) return false;
    const std::optional<ArtifactRecord> artifact = db.find_artifact(key);
    return artifact.has_value() && fs::exists(db.results_dir() / artifact->path);
}

void mark_stored(const fs::path& results_dir, SweepPlan& plan) {
    if (!fs::exists(results_dir / ResultsDb::kFileName)) return;
    ResultsDb db(results_dir, DbAccess::ReadOnly);
    if (db.schema_version() == 0) return;  // being created by another process: nothing stored yet
    for (SweepJob& j : plan.jobs) j.stored = job_output_stored(db, j.stage, j.key, j.task_grid);
}

void record_sweep(ResultsDb& db, const SweepSpec& spec, const SweepPlan& plan) {
    SweepRecord sweep{plan.key, fs::absolute(spec.file).lexically_normal().string(),
                      static_cast<int64_t>(plan.jobs.size()), ""};
    std::vector<SweepJobRecord> jobs;
    for (size_t i = 0; i < plan.jobs.size(); ++i) {
        const SweepJob& j = plan.jobs[i];
        SweepJobRecord r{
            plan.key,    static_cast<int64_t>(i), j.stage, j.key, j.label, nlohmann::json(j.depends_on).dump(),
            std::nullopt};
        if (j.stage == "task") r.task_grid = j.task_grid;
        jobs.push_back(r);
    }
    db.record_sweep(sweep, jobs);
}

fs::path job_shard_dir(const fs::path& shard_dir, const SweepPlan& plan, int index) {
    return shard_dir / plan.key / fmt::format("job-{}", index);
}

JobOutcome run_sweep_job(Workspace& ws, LoadedModel& model, LoadedText& text, const SweepJob& job, bool force) {
    JobOutcome outcome;
    if (job.stage == "capture") {
        const StageResult r = run_capture(ws, model, text, job.capture, force);
        KASCADE_ASSERT(r.key == job.key);
        outcome.cached = r.cached;
    } else if (job.stage == "similarity") {
        const StageResult r = run_similarity(ws, job.capture_key, job.topk, job.granularity, force);
        KASCADE_ASSERT(r.key == job.key);
        outcome.cached = r.cached;
    } else if (job.stage == "schedule") {
        const ScheduleResult r = run_schedule(ws, job.similarity_key, job.schedule, force);
        KASCADE_ASSERT(r.key == job.key);
        outcome.cached = r.cached;
        const auto s = ws.db().load_schedule(r.id);
        outcome.summary =
            fmt::format("schedule {}: {} anchors, {} reuse", r.id, s->record.n_anchor_layers, s->record.n_reuse_layers);
    } else if (job.stage == "task" && !job.dataset.dataset.empty()) {
        DatasetTaskParams params = job.dataset;
        if (params.method.method == EvalMethod::Kascade)
            params.method.schedule_id = stored_schedule_id(ws, job.schedule_key, job.label);
        const DatasetTaskSummary r = run_dataset_task(ws, model, params, {}, force);
        KASCADE_ASSERT(ws.db().find_task_run(job.key)->id == r.task_run_id);
        outcome.cached = r.samples_run == 0;
        outcome.summary = fmt::format("task run {}: {} score {:.4f} density {:.3f}", r.task_run_id, params.dataset_name,
                                      r.score, r.density);
    } else if (job.stage == "task") {
        TaskParams params = job.task;
        if (params.method.method == EvalMethod::Kascade)
            params.method.schedule_id = stored_schedule_id(ws, job.schedule_key, job.label);
        const TaskSummary r = run_task(ws, model, params, {}, force);
        KASCADE_ASSERT(ws.db().find_task_run(job.key)->id == r.task_run_id);
        outcome.cached = r.samples_run == 0;
        outcome.summary = fmt::format("task run {}: score {:.4f} density {:.3f}", r.task_run_id, r.score, r.density);
    } else {
        EvalParams params = job.eval;
        if (params.method == EvalMethod::Kascade)
            params.schedule_id = stored_schedule_id(ws, job.schedule_key, job.label);
        const EvalResult r = run_eval(ws, model, text, params, force);
        const RunDetails run = ws.db().load_run(r.run_id);
        KASCADE_ASSERT(run.run.key == job.key);
        outcome.cached = r.cached;
        outcome.summary =
            fmt::format("run {}: ppl {:.4f} ({:+.2f}%) density {:.3f}{}", r.run_id, run.metrics.ppl_sparse,
                        run.metrics.degradation_pct.value_or(0), run.metrics.density,
                        params.phase == EvalPhase::Decode
                            ? fmt::format(" {:.0f} decode tokens/s", run.metrics.tokens_per_s.value_or(0))
                            : "");
    }
    return outcome;
}

std::string job_log_line(const SweepPlan& plan, int index, const JobOutcome& outcome, double seconds) {
    const SweepJob& j = plan.jobs[index];
    return fmt::format("[{:3}/{}] {:<10} {:<8} {}{}{}  ({:.1f} s)", index + 1, plan.jobs.size(), j.stage,
                       outcome.cached ? "stored" : "computed", j.label, outcome.summary.empty() ? "" : "  -> ",
                       outcome.summary, seconds);
}

void record_job_failure(ResultsDb& db, const SweepPlan& plan, int index, const std::string& error) {
    try {
        db.record_job_failure({0, plan.key, index, plan.jobs[index].key, machine_description(), error, utc_now()});
    } catch (const std::exception&) {
        // The job's own error is reported by the caller; a store that cannot take the note must not hide it.
    }
}

SweepReport run_sweep(const fs::path& results_dir, const SweepSpec& spec, const SweepOptions& options, std::FILE* log) {
    SweepPlan plan = plan_sweep(spec);
    check_plan_key(spec, plan, options);
    mark_stored(results_dir, plan);
    if (options.force) {
        for (SweepJob& j : plan.jobs) j.stored = false;
    }
    if (options.worker) {
        serve_as_worker(results_dir, plan, options.force);
        return {};
    }
    if (options.job_index) return run_one_job(results_dir, spec, plan, options, log);

    SweepReport report;
    report.key = plan.key;
    report.jobs = plan.jobs;
    const int n_jobs = static_cast<int>(plan.jobs.size());
    int to_compute = 0;
    for (const SweepJob& j : plan.jobs) to_compute += j.stored ? 0 : 1;
    auto log_header = [&] {
        std::fprintf(log, "sweep %s: %d jobs, %d stored, %d to compute (results in %s)\n", spec.file.c_str(), n_jobs,
                     n_jobs - to_compute, to_compute, results_dir.c_str());
    };
    if (options.dry_run) {
        check_sweep_inputs(spec, plan);
        log_header();
        for (int i = 0; i < n_jobs; ++i) {
            std::fprintf(log, "[%3d/%d] %-10s %-7s %s\n", i + 1, n_jobs, plan.jobs[i].stage.c_str(),
                         plan.jobs[i].stored ? "stored" : "run", plan.jobs[i].label.c_str());
        }
        return report;
    }

    const double sweep_start = omp_get_wtime();
    Workspace ws(results_dir);
    // Checked before anything is recorded or run: a refused sweep leaves the results folder as it was.
    LoadedModel& model = ws.model(plan.model, plan.tokenizer);
    LoadedText& text = ws.text(plan.text, model);
    check_sweep_inputs(spec, model, text);
    log_header();
    record_sweep(ws.db(), spec, plan);
    if (options.workers > 1 && to_compute > 0) {
        const WorkerTotals totals = run_with_workers(results_dir, spec, plan, options.workers, options.force, log);
        report.computed = totals.computed;
        report.failed = totals.failed;
    } else {
        ProgressLine progress("sweep", to_compute, "jobs");
        for (int i = 0; i < n_jobs; ++i) {
            const double start = omp_get_wtime();
            JobOutcome outcome;
            try {
                outcome = run_sweep_job(ws, model, text, plan.jobs[i], options.force);
            } catch (const std::exception& e) {
                record_job_failure(ws.db(), plan, i, e.what());
                throw;
            }
            if (!outcome.cached) ++report.computed;
            progress.finish();
            std::fprintf(log, "%s\n", job_log_line(plan, i, outcome, omp_get_wtime() - start).c_str());
            std::fflush(log);
            progress.update(report.computed);
        }
        progress.finish();
    }
    for (const SweepJob& j : plan.jobs) {
        if (j.stage == "eval") {
            if (const auto id = ws.db().find_run(j.key)) report.run_ids.push_back(*id);
        } else if (j.stage == "task") {
            if (const auto run = ws.db().find_task_run(j.key))
                (j.dataset.dataset.empty() ? report.task_run_ids : report.dataset_run_ids).push_back(run->id);
        }
    }
    std::fprintf(log, "sweep done: %d jobs computed, %d reused%s, %.1f s\n", report.computed,
                 n_jobs - report.computed - report.failed,
                 report.failed > 0 ? fmt::format(", {} failed", report.failed).c_str() : "",
                 omp_get_wtime() - sweep_start);
    return report;
}

}  // namespace kascade
