// kascade task: long-context task accuracy (passkey, needles, variable tracking) under an attention method, each
// sample stored as it finishes (see pipeline/stages/task_stage.h).
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/method_options.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/stages/dataset_task_stage.h"
#include "pipeline/stages/task_stage.h"

namespace kascade::cli {

namespace {
struct TaskArgs {
    ModelArgs model;
    std::string task{mode_name(TaskParams{}.task)};
    std::vector<int> lengths = TaskParams{}.lengths;
    int depths = 1;
    std::vector<double> depth_pcts;
    int samples = TaskParams{}.samples;
    uint64_t seed = TaskParams{}.seed;
    std::string haystack;
    std::optional<int> max_new_tokens;
    std::string prefill{mode_name(TaskParams{}.prefill)};
    int batch = TaskParams{}.batch;
    MethodOptions method;
    bool json = false;
    bool show_prompt = false;
    // A dataset file instead of generated samples.
    std::string dataset, dataset_name, prompt_file, maxlen_file, metric, chat_template;
    std::optional<int> max_length, limit;
};

void print_dataset_summary(const DatasetTaskSummary& s, const DatasetTaskParams& p, bool json) {
    if (json) {
        const nlohmann::json out = {{"run_ids", {s.task_run_id}},
                                    {"task_run_id", s.task_run_id},
                                    {"task", "dataset"},
                                    {"dataset_name", p.dataset_name},
                                    {"score", s.score},
                                    {"density", s.density},
                                    {"truncated", s.truncated},
                                    {"samples_run", s.samples_run},
                                    {"samples_stored", s.samples_stored}};
        std::printf("%s\n", out.dump().c_str());
        return;
    }
    std::printf(
        "task run %lld  dataset %s  score %.4f  density %.4f  (%d samples run, %d stored already; %d cut in "
        "the middle)\n",
        static_cast<long long>(s.task_run_id), p.dataset_name.c_str(), s.score, s.density, s.samples_run,
        s.samples_stored, s.truncated);
}

void print_summary(const TaskSummary& s, const TaskParams& p, bool json) {
    if (json) {
        nlohmann::json by_length = nlohmann::json::object();
        for (const auto& [length, score] : s.by_length) by_length[std::to_string(length)] = score;
        const nlohmann::json out = {{"run_ids", {s.task_run_id}},   {"task_run_id", s.task_run_id},
                                    {"task", mode_name(p.task)},    {"score", s.score},
                                    {"by_length", by_length},       {"density", s.density},
                                    {"samples_run", s.samples_run}, {"samples_stored", s.samples_stored}};
        std::printf("%s\n", out.dump().c_str());
        return;
    }
    std::printf("task run %lld  %s  score %.4f  density %.4f  (%d samples run, %d stored already)\n",
                static_cast<long long>(s.task_run_id), std::string(mode_name(p.task)).c_str(), s.score, s.density,
                s.samples_run, s.samples_stored);
    for (const auto& [length, score] : s.by_length) std::printf("  length %6d  score %.4f\n", length, score);
}

/// `kascade task --dataset ...`: the method options are parsed as for generated tasks.
void run_dataset_command(const TaskArgs& args, TaskPrefill prefill, const EvalParams& method,
                         const CommonOptions& common) {
    DatasetTaskParams p;
    p.dataset = args.dataset;
    p.dataset_name = args.dataset_name;
    p.prompt_file = args.prompt_file;
    p.maxlen_file = args.maxlen_file;
    p.max_new_tokens = args.max_new_tokens;
    p.max_length = args.max_length;
    if (!args.metric.empty()) p.metric = parse_mode<LongBenchMetric>(args.metric, "--metric");
    if (!args.chat_template.empty()) p.chat_template = parse_mode<ChatTemplate>(args.chat_template, "--chat-template");
    p.limit = args.limit;
    p.prefill = prefill;
    p.batch = args.batch;
    p.method = method;
    if (args.show_prompt) {
        // Nothing is stored: the results folder is only read (for a schedule), never created.
        const auto model = load_model_and_tokenizer(args.model.model, args.model.tokenizer);
        std::optional<ResultsDb> db;
        if (method.method == EvalMethod::Kascade) db.emplace(common.results_dir, DbAccess::ReadOnly);
        const ResolvedDatasetTask r = resolve_dataset_task(db ? &*db : nullptr, *model, p);
        const DatasetPromptTokens tokens = dataset_sample_tokens(r, *model, 0);
        std::printf("%s\n", model->tokenizer->decode(tokens.tokens).c_str());
        std::fprintf(stderr, "kascade: %zu prompt tokens (%lld before the cut, chat template %s); answers: %s\n",
                     tokens.tokens.size(), static_cast<long long>(tokens.full_tokens),
                     std::string(mode_name(r.files.chat_template)).c_str(),
                     nlohmann::json(r.files.samples.front().answers).dump().c_str());
        return;
    }
    Workspace ws(common.results_dir);
    LoadedModel& model = ws.model(args.model.model, args.model.tokenizer);
    // The number of samples is known once the stage has read the file: the line starts with the first sample.
    std::optional<ProgressLine> progress;
    const DatasetTaskSummary s = run_dataset_task(ws, model, p, [&](int done, int total) {
        if (!progress)
            progress.emplace(fmt::format("task {} {}", args.dataset_name, mode_name(method.method)), total, "samples");
        progress->update(done);
    });
    if (progress) progress->finish();
    print_dataset_summary(s, p, args.json);
}

}  // namespace

void register_task_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<TaskArgs>();
    CLI::App* cmd = app.add_subcommand(
        "task", "Long-context task accuracy (passkey, needle retrieval, variable tracking) under an attention method");
    cmd->footer(
        "Each sample (length x depth x index) is generated from --seed, answered greedily and stored as it finishes:\n"
        "running the same command again resumes or reads it. `kascade query tasks` lists task runs.\n"
        "Examples:\n"
        "  kascade task --model tests/fixtures/retrieval-model --task passkey --lengths 1024,2048,4096 --depths 11 "
        "--samples 10 --method dense\n"
        "  kascade task --model tests/fixtures/retrieval-model --task niah_multikey --lengths 4096 --method oracle "
        "--topk-pct 10 --k-min 64 --prefill dense --json\n"
        "  kascade task --model M --task passkey --lengths 2048 --schedule 3 --haystack data/moby-dick/pg2701.txt\n"
        "  kascade task --model ~/models/Llama-3.1-8B-Instruct --dataset LongBench/data/qasper.jsonl --dataset-name "
        "qasper --prompt-file LongBench/config/dataset2prompt.json --maxlen-file LongBench/config/dataset2maxlen.json "
        "--max-length 31500 --schedule 3 --batch 8");
    args->model.add_to(*cmd);
    args->model.add_numerics_options_to(*cmd);
    cmd->add_option("--task", args->task, fmt::format("{}", fmt::join(mode_names<TaskKind>(), ", ")))
        ->capture_default_str();
    check_range(
        cmd->add_option("--lengths", args->lengths, "prompt lengths in tokens, BOS included (e.g. 1024,2048,4096)")
            ->delimiter(',')
            ->capture_default_str(),
        param_range::kTaskLength);
    auto* depths =
        check_range(cmd->add_option("--depths", args->depths, "needle depths evenly spaced over 0-100 % (1: 50 %)")
                        ->capture_default_str(),
                    param_range::kDepthCount);
    auto* depth_pcts =
        cmd->add_option("--depth-pcts", args->depth_pcts, "needle depths in %, instead of --depths (e.g. 0,50,100)")
            ->delimiter(',');
    check_range(depth_pcts, param_range::kDepthPct);
    depths->excludes(depth_pcts);
    check_range(cmd->add_option("--samples", args->samples, "samples per length and depth")->capture_default_str(),
                param_range::kTaskSamples);
    cmd->add_option("--seed", args->seed, "what the samples are drawn from")->capture_default_str();
    cmd->add_option("--haystack", args->haystack, "text file whose sentences hide the needles (default: filler)");
    check_range(cmd->add_option("--max-new-tokens", args->max_new_tokens,
                                "answer token limit (default: the task's, enough for its answer)"),
                param_range::kMaxNewTokens);
    cmd->add_option("--prefill", args->prefill,
                    "sparse (the prompt through the method) or dense (the decode-only ablation; quest always)")
        ->capture_default_str();
    check_range(cmd->add_option("--batch", args->batch,
                                "samples answered together, one batched forward pass per decode step (same answers; "
                                "decode tokens/s per sample and the batch column change)")
                    ->capture_default_str(),
                param_range::kBatch);
    args->method.add_to(*cmd);
    auto* dataset = cmd->add_option("--dataset", args->dataset,
                                    "a JSONL dataset (LongBench's fields, or `prompt` and `answers`) instead of "
                                    "generated samples");
    auto* dataset_name = cmd->add_option("--dataset-name", args->dataset_name,
                                         "the dataset's LongBench name (picks the metric, template and answer length)");
    auto* prompt_file = cmd->add_option("--prompt-file", args->prompt_file,
                                        "dataset2prompt.json: the prompt template of --dataset-name (default: each "
                                        "sample's `prompt`)");
    auto* maxlen_file =
        cmd->add_option("--maxlen-file", args->maxlen_file, "dataset2maxlen.json: the answer length of --dataset-name");
    auto* max_length = check_range(
        cmd->add_option("--max-length", args->max_length,
                        "prompt tokens at most (BOS included); longer ones are cut in the middle (default: the "
                        "model's context less the answer length)"),
        param_range::kTaskLength);
    auto* metric = cmd->add_option("--metric", args->metric,
                                   fmt::format("a dataset's metric, needed for a name LongBench does not have: {}",
                                               fmt::join(mode_names<LongBenchMetric>(), ", ")));
    auto* chat_template =
        cmd->add_option("--chat-template", args->chat_template,
                        fmt::format("the instruct model's chat template: {} (default: the one tokenizer_config.json "
                                    "holds, none without one)",
                                    fmt::join(mode_names<ChatTemplate>(), " | ")));
    auto* limit = check_range(cmd->add_option("--limit", args->limit, "only the first N samples of --dataset"), 1);
    for (CLI::Option* o : {dataset_name, prompt_file, maxlen_file, max_length, metric, chat_template, limit})
        o->needs(dataset);
    for (CLI::Option* o : {cmd->get_option("--task"), cmd->get_option("--lengths"), depths, depth_pcts,
                           cmd->get_option("--samples"), cmd->get_option("--seed"), cmd->get_option("--haystack")})
        dataset->excludes(o);
    cmd->add_flag("--show-prompt", args->show_prompt,
                  "print the prompt of the first sample (first length and depth) and its expected answer; run nothing");
    cmd->add_flag("--json", args->json, "print one JSON object: run_ids, score, by_length (length -> score), ...");
    cmd->callback([args, depth_pcts, dataset, &common] {
        TaskParams p;
        p.task = parse_mode<TaskKind>(args->task, "--task");
        p.lengths = args->lengths;
        p.depths_pct = depth_pcts->count() ? args->depth_pcts : evenly_spaced_depths(args->depths);
        p.samples = args->samples;
        p.seed = args->seed;
        p.haystack = args->haystack;
        p.max_new_tokens = args->max_new_tokens;
        p.prefill = parse_mode<TaskPrefill>(args->prefill, "--prefill");
        p.batch = args->batch;
        EvalParams& m = p.method;
        args->method.apply_to(m, "task");
        m.matmul = args->model.matmul_precision();
        m.kv_dtype = args->model.kv_cache_dtype();
        if (dataset->count()) return run_dataset_command(*args, p.prefill, m, common);

        if (args->show_prompt) {
            // Nothing is stored: the results folder is only read (for a schedule), never created.
            const auto model = load_model_and_tokenizer(args->model.model, args->model.tokenizer);
            std::optional<ResultsDb> db;
            if (m.method == EvalMethod::Kascade) db.emplace(common.results_dir, DbAccess::ReadOnly);
            const ResolvedTask r = resolve_task(db ? &*db : nullptr, *model, p);
            const TaskSample s = make_resolved_task_sample(r, *model, p.lengths.front(), p.depths_pct.front(), 0);
            std::printf("%s\n", s.prompt.c_str());
            std::fprintf(stderr, "kascade: %zu prompt tokens; expected answer: %s\n", s.tokens.size(),
                         nlohmann::json(s.expected).dump().c_str());
            return;
        }
        Workspace ws(common.results_dir);
        LoadedModel& model = ws.model(args->model.model, args->model.tokenizer);
        const int total = static_cast<int>(p.lengths.size() * p.depths_pct.size()) * p.samples;
        ProgressLine progress(fmt::format("task {} {}", args->task, mode_name(m.method)), total, "samples");
        const TaskSummary s = run_task(ws, model, p, [&](int done, int) { progress.update(done); });
        progress.finish();
        print_summary(s, p, args->json);
    });
}

}  // namespace kascade::cli
