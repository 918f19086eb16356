// pipeline/stages/dataset_task_stage.cpp: resolve, measure and record of task runs on dataset files.
#include "pipeline/stages/dataset_task_stage.h"

#include <omp.h>

#include <algorithm>
#include <set>
#include <span>

#include "base/error.h"
#include "build_info.h"
#include "io/file_util.h"
#include "io/host_info.h"
#include "pipeline/runtime/greedy_generation.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/task_stage.h"
#include "pipeline/tasks/chat_template_recognition.h"

namespace kascade {

namespace {

/// The task_runs.task of every dataset run (its dataset is task_runs.dataset_name).
constexpr std::string_view kDatasetTask = "dataset";

/// The scoring rule: a LongBench dataset's own, or the named metric for a dataset of another name.
LongBenchDataset dataset_scoring(const DatasetTaskParams& p) {
    const bool longbench = std::find(longbench_dataset_names().begin(), longbench_dataset_names().end(),
                                     p.dataset_name) != longbench_dataset_names().end();
    if (longbench && !p.metric) return parse_longbench_dataset(p.dataset_name, "--dataset-name");
    if (!p.metric) {
        // Not one of LongBench's English datasets: a Chinese one or a misspelt one is refused by name here, and any
        // other name needs its metric.
        try {
            parse_longbench_dataset(p.dataset_name, "--dataset-name");
        } catch (const Error& e) {
            if (std::string_view(e.what()).find("Chinese") != std::string_view::npos) throw;
        }
        KASCADE_FAIL("--dataset-name '{}' is not a LongBench dataset, so its metric is unknown: give --metric ({})",
                     p.dataset_name, fmt::join(mode_names<LongBenchMetric>(), ", "));
    }
    LongBenchDataset scoring = longbench ? parse_longbench_dataset(p.dataset_name, "--dataset-name")
                                         : LongBenchDataset{"", false, *p.metric, false, true};
    scoring.metric = *p.metric;
    return scoring;
}

/// A sample's prompt text before the chat template: the template with its fields, or its `prompt` field.
std::string dataset_prompt_text(const DatasetTaskParams& p, const std::string& prompt_template,
                                const DatasetSample& sample) {
    if (prompt_template.empty()) return dataset_sample_prompt(sample, p.dataset);
    return format_prompt_template(prompt_template, sample,
                                  fmt::format("{} (entry \"{}\")", p.prompt_file.string(), p.dataset_name));
}

TaskRunRecord dataset_run_record(Workspace& ws, LoadedModel& model, const ResolvedDatasetTask& r) {
    const ResolvedEval& m = r.method;
    TaskRunRecord run;
    run.key = r.key;
    run.model_id = ws.stored_id(model);
    run.text_id = ws.db().upsert_text(r.files.dataset_text);
    if (m.schedule) run.schedule_id = m.schedule->record.id;
    run.task = std::string(kDatasetTask);
    run.dataset_name = r.params.dataset_name;
    run.metric = std::string(mode_name(r.files.scoring.metric));
    run.seed = 0;
    run.max_new_tokens = r.files.max_new_tokens;
    run.max_length = r.max_length;
    run.chat_template = std::string(mode_name(r.files.chat_template));
    run.prefill = std::string(mode_name(r.params.prefill));
    run.method = std::string(mode_name(m.params.method));
    set_method_columns(m, run);
    run.git_commit = KASCADE_GIT_COMMIT;
    run.machine = machine_description();
    return run;
}

/// Answers and scores a batch of the file's samples (their indices among r.files.samples), decode steps batched.
std::vector<DatasetSampleRecord> measure_dataset_samples(const Transformer& runtime, const LoadedModel& model,
                                                         const ResolvedDatasetTask& r, std::span<const int> indices) {
    std::vector<DatasetPromptTokens> prompts;
    std::vector<std::vector<int32_t>> tokens;
    for (const int index : indices) {
        prompts.push_back(dataset_sample_tokens(r, model, index));
        tokens.push_back(prompts.back().tokens);
    }
    // Datasets scored on their first line stop there (the score is the same; LongBench generates on, up to EOS).
    const std::vector<AnsweredPrompt> answers = answer_prompts(runtime, model, r.method, r.params.prefill, tokens,
                                                               {.max_new_tokens = r.files.max_new_tokens,
                                                                .stop_at_newline = r.files.scoring.first_line_only,
                                                                .kv_dtype = r.method.params.kv_dtype});

    std::vector<DatasetSampleRecord> records;
    for (size_t i = 0; i < indices.size(); ++i) {
        const DatasetSample& sample = r.files.samples[static_cast<std::size_t>(indices[i])];
        const DatasetPromptTokens& prompt = prompts[i];
        const AnsweredPrompt& a = answers[i];
        DatasetSampleRecord& s = records.emplace_back();
        s.sample_index = sample.index;
        if (!sample.id.empty()) s.sample_id = sample.id;
        s.prompt_tokens = static_cast<int64_t>(prompt.tokens.size());
        s.full_tokens = prompt.full_tokens;
        if (prompt.cut_at >= 0) s.cut_at = prompt.cut_at;
        s.answers_json = nlohmann::json(sample.answers).dump();
        s.generated = a.answer.text;
        s.score = longbench_sample_score(r.files.scoring, a.answer.text, sample.answers, sample.all_classes);
        s.generated_tokens = static_cast<int64_t>(a.answer.tokens.size());
        s.density = a.density;
        s.prefill_tokens_per_s = a.prefill_tokens_per_s;
        s.decode_tokens_per_s = a.decode_tokens_per_s;
        s.threads = omp_get_max_threads();
        s.batch = static_cast<int64_t>(indices.size());
        s.finished_at = utc_now();
    }
    return records;
}

}  // namespace

DatasetRunFiles read_dataset_run_files(const DatasetTaskParams& params, const Tokenizer& tokenizer) {
    KASCADE_CHECK(!params.dataset.empty(), "--dataset is empty (expected a JSONL file)");
    KASCADE_CHECK(!params.dataset_name.empty(),
                  "--dataset needs --dataset-name (LongBench's name of the dataset, e.g. qasper: it picks the "
                  "metric, and the entries of --prompt-file and --maxlen-file)");
    KASCADE_CHECK(!params.limit || *params.limit >= 1, "invalid --limit {} (must be >= 1)", params.limit.value_or(0));
    DatasetRunFiles f;
    f.scoring = dataset_scoring(params);
    if (params.max_new_tokens) {
        f.max_new_tokens = *params.max_new_tokens;
    } else {
        KASCADE_CHECK(!params.maxlen_file.empty(),
                      "--dataset needs the answer length: --maxlen-file dataset2maxlen.json or --max-new-tokens N");
        f.max_new_tokens = read_dataset_max_new_tokens(params.maxlen_file, params.dataset_name);
    }
    // One read: the samples and the file's texts row (its hash keys the run) come from the same bytes.
    const std::string contents = read_file(params.dataset);
    f.samples = parse_dataset_jsonl(contents, params.dataset);
    if (params.limit && static_cast<std::size_t>(*params.limit) < f.samples.size())
        f.samples.resize(static_cast<std::size_t>(*params.limit));
    f.dataset_text = text_record(params.dataset, contents);
    if (!params.prompt_file.empty())
        f.prompt_template = read_dataset_prompt_template(params.prompt_file, params.dataset_name);
    for (const DatasetSample& sample : f.samples) dataset_prompt_text(params, f.prompt_template, sample);

    // LongBench gives its few-shot and code datasets to instruct models as they are (no chat template).
    if (f.scoring.chat_template) {
        std::optional<TokenizerConfig> config;
        if (!tokenizer.config_file().empty())
            config = read_tokenizer_config_file(tokenizer.config_file(), /*with_added_tokens=*/false,
                                                /*with_chat_template=*/true);
        const ChatTemplateChoice chat = choose_chat_template(params.chat_template, config);
        f.chat_template = chat.family;
        f.chat_tokens = chat.tokens;
    }
    return f;
}

std::string dataset_task_key(const DatasetKeyInputs& k) {
    nlohmann::json inputs = {
        {"model", k.model_hash},
        {"tokenizer", k.tokenizer_hash},
        {"dataset", k.dataset_hash},
        {"prompt_template", k.prompt_template.empty() ? std::string("prompt field") : hash_hex(k.prompt_template)}};
    nlohmann::json params = {{"task", kDatasetTask},
                             {"dataset_name", k.dataset_name},
                             {"metric", std::string(mode_name(k.metric))},
                             {"max_length", k.max_length},
                             {"max_new_tokens", k.max_new_tokens},
                             {"chat_template", std::string(mode_name(k.chat_template))},
                             {"prefill", std::string(mode_name(k.prefill))}};
    add_method_key(k.method_key, inputs, params);
    return content_key("task", kTaskFormatVersion, inputs, params);
}

ResolvedDatasetTask resolve_dataset_task(ResultsDb* db, const LoadedModel& model, const DatasetTaskParams& params) {
    const ModelConfig& c = model.weights.config;
    KASCADE_CHECK(params.batch >= 1, "invalid --batch {} (must be >= 1)", params.batch);
    ResolvedDatasetTask r;
    r.params = params;
    r.files = read_dataset_run_files(params, *model.tokenizer);
    const int max_new_tokens = r.files.max_new_tokens;
    KASCADE_CHECK(max_new_tokens < c.max_seq_len,
                  "invalid answer length {} (--max-new-tokens or --maxlen-file): it must be below the model's context "
                  "of {} positions",
                  max_new_tokens, c.max_seq_len);
    r.max_length = params.max_length.value_or(c.max_seq_len - max_new_tokens);
    KASCADE_CHECK(r.max_length >= 2 && static_cast<int64_t>(r.max_length) + max_new_tokens <= c.max_seq_len,
                  "invalid --max-length {}: with {} new tokens it must be in [2, {}] (the model's context of {} "
                  "positions, max_position_embeddings, of \"{}\")",
                  r.max_length, max_new_tokens, c.max_seq_len - max_new_tokens, c.max_seq_len, model.path.string());

    r.params.prefill = effective_task_prefill(params.method.method, params.prefill);
    EvalParams method = params.method;
    method.phase = EvalPhase::Decode;
    KASCADE_CHECK(db != nullptr || params.method.method != EvalMethod::Kascade,
                  "method kascade needs the results folder of its schedule");
    r.method = resolve_method(db, model.model_hash, model.path.string(), method, r.max_length + max_new_tokens,
                              "--max-length + max-new-tokens");
    check_method_layers(method, model.weights.config.n_layers);
    r.key = dataset_task_key({.model_hash = model.model_hash,
                              .tokenizer_hash = model.tokenizer_hash,
                              .dataset_hash = r.files.dataset_text.hash,
                              .prompt_template = r.files.prompt_template,
                              .dataset_name = params.dataset_name,
                              .metric = r.files.scoring.metric,
                              .max_length = r.max_length,
                              .max_new_tokens = max_new_tokens,
                              .chat_template = r.files.chat_template,
                              .prefill = r.params.prefill,
                              .method_key = method_key_inputs(r.method)});
    return r;
}

std::string dataset_sample_text(const ResolvedDatasetTask& r, int index) {
    return dataset_prompt_text(r.params, r.files.prompt_template, r.files.samples[static_cast<std::size_t>(index)]);
}

DatasetPromptTokens dataset_sample_tokens(const ResolvedDatasetTask& r, const LoadedModel& model, int index) {
    const std::string text = dataset_sample_text(r, index);
    const ChatMessage user{ChatRole::User, text};
    std::string rendered =
        r.files.chat_template == ChatTemplate::None
            ? text
            : render_chat(r.files.chat_template, r.files.chat_tokens, {&user, 1}, /*add_generation_prompt=*/true);
    // A template that writes BOS as text (Llama 3's <|begin_of_text|>, Llama 2's <s>) loses it here and gets the BOS
    // id below: a SentencePiece tokenizer.model would read "<s>" as plain text.
    if (chat_template_writes_bos(r.files.chat_template) && rendered.starts_with(r.files.chat_tokens.bos))
        rendered.erase(0, r.files.chat_tokens.bos.size());
    return dataset_prompt_tokens(rendered, *model.tokenizer,
                                 sequence_start_token(model.weights.config, model.tokenizer.get()), r.max_length);
}

bool dataset_samples_stored(ResultsDb& db, std::string_view key, int samples) {
    const std::optional<TaskRunRecord> run = db.find_task_run(key);
    if (!run) return false;
    int stored = 0;
    for (const DatasetSampleRecord& s : db.list_dataset_samples(run->id)) stored += s.sample_index < samples;
    return stored == samples;
}

DatasetTaskSummary run_dataset_task(Workspace& ws, LoadedModel& model, const DatasetTaskParams& params,
                                    const std::function<void(int, int)>& progress, bool force) {
    const ResolvedDatasetTask r = resolve_dataset_task(&ws.db(), model, params);
    std::optional<int64_t> run_id;
    std::set<int64_t> stored;
    if (const auto run = ws.db().find_task_run(r.key)) {
        run_id = run->id;
        for (const DatasetSampleRecord& s : ws.db().list_dataset_samples(run->id)) stored.insert(s.sample_index);
    }

    DatasetTaskSummary summary;
    const Transformer runtime(model.weights, 0, r.method.params.matmul);
    const int total = static_cast<int>(r.files.samples.size());
    std::vector<int> pending;
    for (int i = 0; i < total; ++i) {
        if (!force && stored.count(r.files.samples[static_cast<std::size_t>(i)].index))
            ++summary.samples_stored;
        else
            pending.push_back(i);
    }
    if (progress) progress(summary.samples_stored, total);
    const size_t batch = static_cast<size_t>(r.params.batch);
    for (size_t b = 0; b < pending.size(); b += batch) {
        const std::span<const int> indices(pending.data() + b, std::min(batch, pending.size() - b));
        std::vector<DatasetSampleRecord> samples = measure_dataset_samples(runtime, model, r, indices);
        // The run row is stored with its first samples, so a command refused or killed before has stored nothing.
        if (!run_id) run_id = ws.db().insert_task_run(dataset_run_record(ws, model, r)).id;
        for (DatasetSampleRecord& sample : samples) {
            sample.task_run_id = *run_id;
            ws.db().insert_dataset_sample(sample, /*replace=*/force);
        }
        summary.samples_run += static_cast<int>(samples.size());
        if (progress) progress(summary.samples_stored + summary.samples_run, total);
    }

    // The summary reads the stored rows, so that a sample another process stored counts as it was stored.
    summary.task_run_id = *run_id;
    double score = 0, density = 0;
    int n = 0;
    for (const DatasetSampleRecord& s : ws.db().list_dataset_samples(*run_id)) {
        if (s.sample_index >= total) continue;  // beyond this call's --limit
        score += s.score;
        density += s.density;
        summary.truncated += s.cut_at.has_value();
        ++n;
    }
    KASCADE_ASSERT(n == total);
    summary.score = score / n;
    summary.density = density / n;
    return summary;
}

}  // namespace kascade
