#include "pipeline/stages/task_stage.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <tuple>

#include "base/error.h"
#include "build_info.h"
#include "io/file_util.h"
#include "io/host_info.h"
#include "io/text_file.h"
#include "pipeline/runtime/greedy_generation.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/tasks/task_prompt.h"
#include "pipeline/tasks/task_score.h"

namespace kascade {

namespace {

/// A sample's place in the grid; depths are compared as the doubles evenly_spaced_depths or the user gave.
using SampleId = std::tuple<int64_t, double, int64_t>;

std::string resolved_task_key(const LoadedModel& model, const ResolvedTask& r) {
    return task_key({.model_hash = model.model_hash,
                     .tokenizer_hash = model.tokenizer_hash,
                     .haystack_hash = r.haystack_hash,
                     .task = r.params.task,
                     .seed = r.params.seed,
                     .max_new_tokens = r.max_new_tokens,
                     .prefill = r.params.prefill,
                     .method_key = method_key_inputs(r.method)});
}

TaskRunRecord task_run_record(Workspace& ws, LoadedModel& model, const ResolvedTask& r) {
    const ResolvedEval& m = r.method;
    const EvalMethod method = m.params.method;
    TaskRunRecord run;
    run.key = r.key;
    run.model_id = ws.stored_id(model);
    if (r.haystack_text) run.text_id = ws.db().upsert_text(*r.haystack_text);
    if (m.schedule) run.schedule_id = m.schedule->record.id;
    run.task = std::string(mode_name(r.params.task));
    run.metric = std::string(mode_name(r.metric));
    run.seed = static_cast<int64_t>(r.params.seed);
    run.max_new_tokens = r.max_new_tokens;
    run.prefill = std::string(mode_name(r.params.prefill));
    run.method = std::string(mode_name(method));
    set_method_columns(m, run);
    run.git_commit = KASCADE_GIT_COMMIT;
    run.machine = machine_description();
    return run;
}

/// Generates, answers and scores a batch of samples (steps 2 and 3's measurement), their decode steps batched.
std::vector<TaskSampleRecord> measure_samples(const Transformer& runtime, const LoadedModel& model,
                                              const ResolvedTask& r, std::span<const SampleId> ids) {
    std::vector<TaskSample> samples;
    std::vector<std::vector<int32_t>> prompts;
    for (const auto& [length, depth, index] : ids) {
        samples.push_back(
            make_resolved_task_sample(r, model, static_cast<int>(length), depth, static_cast<int>(index)));
        prompts.push_back(samples.back().tokens);
    }
    const std::vector<AnsweredPrompt> answers = answer_prompts(
        runtime, model, r.method, r.params.prefill, prompts,
        {.max_new_tokens = r.max_new_tokens, .stop_at_newline = true, .kv_dtype = r.method.params.kv_dtype});

    std::vector<TaskSampleRecord> records;
    for (size_t i = 0; i < ids.size(); ++i) {
        const auto& [length, depth, index] = ids[i];
        const AnsweredPrompt& a = answers[i];
        TaskSampleRecord& s = records.emplace_back();
        s.length = length;
        s.depth_pct = depth;
        s.sample_index = index;
        s.needle_depth = std::clamp(samples[i].needle_depth, 0.0, 1.0);
        s.expected_json = nlohmann::json(samples[i].expected).dump();
        s.generated = a.answer.text;
        s.score = score_task_output(r.metric, a.answer.text, samples[i].expected);
        s.generated_tokens = static_cast<int64_t>(a.answer.tokens.size());
        s.density = a.density;
        s.prefill_tokens_per_s = a.prefill_tokens_per_s;
        s.decode_tokens_per_s = a.decode_tokens_per_s;
        s.threads = omp_get_max_threads();
        s.batch = static_cast<int64_t>(ids.size());
        s.finished_at = utc_now();
    }
    return records;
}

/// The samples of the grid (lengths x depths x samples) in the order they are run.
std::vector<SampleId> sample_grid(const std::vector<int>& lengths, const std::vector<double>& depths_pct, int samples) {
    std::vector<SampleId> grid;
    for (const int length : lengths)
        for (const double depth : depths_pct)
            for (int i = 0; i < samples; ++i) grid.emplace_back(length, depth, i);
    return grid;
}

std::set<SampleId> stored_samples(ResultsDb& db, int64_t task_run_id) {
    std::set<SampleId> stored;
    for (const TaskSampleRecord& s : db.list_task_samples(task_run_id))
        stored.emplace(s.length, s.depth_pct, s.sample_index);
    return stored;
}

}  // namespace

std::vector<AnsweredPrompt> answer_prompts(const Transformer& runtime, const LoadedModel& model,
                                           const ResolvedEval& method, TaskPrefill prefill,
                                           std::span<const std::vector<int32_t>> prompts,
                                           const GreedyOptions& options) {
    std::vector<std::unique_ptr<AttentionPolicy>> policies;
    std::vector<DenseAttention> dense(prompts.size());
    std::vector<GreedyRequest> requests;
    for (size_t i = 0; i < prompts.size(); ++i) {
        AttentionPolicy* p = policies.emplace_back(make_method_policy(method, model.weights.config.n_layers)).get();
        requests.push_back({prompts[i], prefill == TaskPrefill::Sparse ? p : &dense[i], p});
    }
    const std::vector<GreedyResult> answers = generate_greedy_batch(runtime, *model.tokenizer, requests, options);

    std::vector<AnsweredPrompt> out;
    for (size_t i = 0; i < prompts.size(); ++i) {
        AnsweredPrompt& a = out.emplace_back();
        a.answer = answers[i];
        if (method.params.method != EvalMethod::Dense) {
            LayerDensity density;
            for (const LayerDensity& d : policies[i]->layer_density()) density.add(d);
            a.density = density.ratio();
        }
        if (a.answer.prefill_s > 0)
            a.prefill_tokens_per_s = static_cast<double>(prompts[i].size()) / a.answer.prefill_s;
        if (a.answer.decode_steps > 0 && a.answer.decode_s > 0)
            a.decode_tokens_per_s = a.answer.decode_steps / a.answer.decode_s;
    }
    return out;
}

std::string task_key(const TaskKeyInputs& k) {
    nlohmann::json inputs = {{"model", k.model_hash},
                             {"tokenizer", k.tokenizer_hash},
                             {"haystack", k.haystack_hash.empty() ? "filler" : k.haystack_hash}};
    nlohmann::json params = {{"task", std::string(mode_name(k.task))},
                             {"seed", k.seed},
                             {"max_new_tokens", k.max_new_tokens},
                             {"prefill", std::string(mode_name(k.prefill))}};
    add_method_key(k.method_key, inputs, params);
    return content_key("task", kTaskFormatVersion, inputs, params);
}

TaskPrefill effective_task_prefill(EvalMethod method, TaskPrefill requested) {
    return is_decode_only_method(method) || method == EvalMethod::Dense ? TaskPrefill::Dense : requested;
}

bool task_grid_stored(ResultsDb& db, std::string_view key, const std::vector<int>& lengths,
                      const std::vector<double>& depths_pct, int samples) {
    const std::optional<TaskRunRecord> run = db.find_task_run(key);
    if (!run) return false;
    const std::set<SampleId> stored = stored_samples(db, run->id);
    for (const SampleId& id : sample_grid(lengths, depths_pct, samples))
        if (!stored.count(id)) return false;
    return true;
}

TaskSample make_resolved_task_sample(const ResolvedTask& r, const LoadedModel& model, int length, double depth,
                                     int index) {
    return make_task_sample({r.params.task, r.params.seed, length, depth, index}, r.haystack, *model.tokenizer,
                            sequence_start_token(model.weights.config, model.tokenizer.get()));
}

std::vector<double> evenly_spaced_depths(int n) {
    KASCADE_CHECK(n >= 1, "invalid --depths {} (must be >= 1)", n);
    if (n == 1) return {50.0};
    std::vector<double> depths;
    // Rounded to 1e-6 so that the same count gives bit-identical depths (they are part of a sample's identity).
    for (int i = 0; i < n; ++i) depths.push_back(std::round(1e6 * 100.0 * i / (n - 1)) / 1e6);
    return depths;
}

ResolvedTask resolve_task(ResultsDb* db, const LoadedModel& model, const TaskParams& params) {
    const ModelConfig& c = model.weights.config;
    ResolvedTask r;
    r.params = params;
    const TaskDefaults defaults = task_defaults(params.task);
    r.metric = defaults.metric;
    r.max_new_tokens = params.max_new_tokens.value_or(defaults.max_new_tokens);
    KASCADE_CHECK(r.max_new_tokens >= 1, "invalid --max-new-tokens {} (must be >= 1)", r.max_new_tokens);
    KASCADE_CHECK(!params.lengths.empty(), "--lengths is empty (expected prompt lengths in tokens, e.g. 1024,2048)");
    KASCADE_CHECK(!params.depths_pct.empty(), "no depths (expected --depths N or --depth-pcts P,Q,...)");
    KASCADE_CHECK(params.samples >= 1, "invalid --samples {} (must be >= 1)", params.samples);
    KASCADE_CHECK(params.batch >= 1, "invalid --batch {} (must be >= 1)", params.batch);
    for (const int length : params.lengths) {
        KASCADE_CHECK(length >= 1 && static_cast<int64_t>(length) + r.max_new_tokens <= c.max_seq_len,
                      "invalid length {} in --lengths: with {} new tokens it must be in [1, {}] (the model's context "
                      "of {} positions, max_position_embeddings, of \"{}\")",
                      length, r.max_new_tokens, c.max_seq_len - r.max_new_tokens, c.max_seq_len, model.path.string());
    }
    for (const double d : params.depths_pct)
        KASCADE_CHECK(d >= 0 && d <= 100, "invalid depth {} (must be a percentage in [0, 100])", d);
    r.params.prefill = effective_task_prefill(params.method.method, params.prefill);

    const int max_length = *std::max_element(params.lengths.begin(), params.lengths.end());
    EvalParams method = params.method;
    method.phase = EvalPhase::Decode;
    KASCADE_CHECK(db != nullptr || params.method.method != EvalMethod::Kascade,
                  "method kascade needs the results folder of its schedule");
    r.method = resolve_method(db, model.model_hash, model.path.string(), method, max_length + r.max_new_tokens,
                              "longest length + max-new-tokens");
    check_method_layers(method, model.weights.config.n_layers);

    if (params.haystack.empty()) {
        r.haystack = haystack_sentences(kFillerHaystack, "filler");
    } else {
        const std::string text = read_text_file(params.haystack);
        r.haystack = haystack_sentences(text, fmt::format("\"{}\"", params.haystack.string()));
        r.haystack_hash = hash_file_hex(params.haystack);
        r.haystack_text = text_record(params.haystack, text);
    }
    // The shortest prompt must hold the instruction, needles and question: refused here, before anything is stored.
    const int min_length = *std::min_element(params.lengths.begin(), params.lengths.end());
    make_resolved_task_sample(r, model, min_length, params.depths_pct.front(), 0);
    r.key = resolved_task_key(model, r);
    return r;
}

TaskSummary run_task(Workspace& ws, LoadedModel& model, const TaskParams& params,
                     const std::function<void(int, int)>& progress, bool force) {
    const ResolvedTask r = resolve_task(&ws.db(), model, params);
    std::optional<int64_t> run_id;
    std::set<SampleId> stored;
    if (const auto run = ws.db().find_task_run(r.key)) {
        run_id = run->id;
        stored = stored_samples(ws.db(), run->id);
    }
    const std::vector<SampleId> grid = sample_grid(r.params.lengths, r.params.depths_pct, r.params.samples);

    TaskSummary summary;
    const Transformer runtime(model.weights, 0, r.method.params.matmul);
    std::vector<SampleId> pending;
    for (const SampleId& id : grid) {
        if (!force && stored.count(id))
            ++summary.samples_stored;
        else
            pending.push_back(id);
    }
    if (progress) progress(summary.samples_stored, static_cast<int>(grid.size()));
    const size_t batch = static_cast<size_t>(r.params.batch);
    for (size_t b = 0; b < pending.size(); b += batch) {
        const std::span<const SampleId> ids(pending.data() + b, std::min(batch, pending.size() - b));
        std::vector<TaskSampleRecord> samples = measure_samples(runtime, model, r, ids);
        // The run row is stored with its first samples, so a command refused or killed before has stored nothing.
        if (!run_id) run_id = ws.db().insert_task_run(task_run_record(ws, model, r)).id;
        for (TaskSampleRecord& sample : samples) {
            sample.task_run_id = *run_id;
            ws.db().insert_task_sample(sample, /*replace=*/force);
        }
        summary.samples_run += static_cast<int>(samples.size());
        if (progress) progress(summary.samples_stored + summary.samples_run, static_cast<int>(grid.size()));
    }

    // The summary reads the stored rows, so that a sample another process stored counts as it was stored.
    summary.task_run_id = *run_id;
    const std::set<SampleId> in_grid(grid.begin(), grid.end());
    std::map<int, std::pair<double, int>> by_length;
    double total = 0, density = 0;
    int n = 0;
    for (const TaskSampleRecord& s : ws.db().list_task_samples(*run_id)) {
        if (!in_grid.count({s.length, s.depth_pct, s.sample_index})) continue;
        auto& [sum, count] = by_length[static_cast<int>(s.length)];
        sum += s.score;
        ++count;
        total += s.score;
        density += s.density;
        ++n;
    }
    KASCADE_ASSERT(n == static_cast<int>(grid.size()));
    for (const auto& [length, sc] : by_length) summary.by_length[length] = sc.first / sc.second;
    summary.score = total / n;
    summary.density = density / n;
    return summary;
}

}  // namespace kascade
