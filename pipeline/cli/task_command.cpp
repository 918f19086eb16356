// kascade task: long-context task accuracy (passkey, needles, variable tracking) under an attention method, each
// sample stored as it finishes (see pipeline/stages/task_stage.h).
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/cli/topk_options.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/stages/task_stage.h"

namespace kascade::cli {

namespace {
struct TaskArgs {
    ModelArgs model;
    std::string task{task_kind_name(TaskParams{}.task)};
    std::vector<int> lengths = TaskParams{}.lengths;
    int depths = 1;
    std::vector<double> depth_pcts;
    int samples = TaskParams{}.samples;
    uint64_t seed = TaskParams{}.seed;
    std::string haystack;
    std::optional<int> max_new_tokens;
    std::string prefill{task_prefill_name(TaskParams{}.prefill)};
    int64_t schedule_id = 0;
    std::string method;
    TopKOptions topk;
    std::optional<int> tile;
    std::string pooling;
    int page_size = EvalParams{}.quest_page;
    bool json = false;
    bool show_prompt = false;
};

void print_summary(const TaskSummary& s, const TaskParams& p, bool json) {
    if (json) {
        nlohmann::json by_length = nlohmann::json::object();
        for (const auto& [length, score] : s.by_length) by_length[std::to_string(length)] = score;
        const nlohmann::json out = {{"run_ids", {s.task_run_id}},     {"task_run_id", s.task_run_id},
                                    {"task", task_kind_name(p.task)}, {"score", s.score},
                                    {"by_length", by_length},         {"density", s.density},
                                    {"samples_run", s.samples_run},   {"samples_stored", s.samples_stored}};
        std::printf("%s\n", out.dump().c_str());
        return;
    }
    std::printf("task run %lld  %s  score %.4f  density %.4f  (%d samples run, %d stored already)\n",
                static_cast<long long>(s.task_run_id), std::string(task_kind_name(p.task)).c_str(), s.score, s.density,
                s.samples_run, s.samples_stored);
    for (const auto& [length, score] : s.by_length) std::printf("  length %6d  score %.4f\n", length, score);
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
        "  kascade task --model M --task passkey --lengths 2048 --schedule 3 --haystack data/moby-dick/pg2701.txt");
    args->model.add_to(*cmd);
    cmd->add_option("--task", args->task, fmt::format("{}", fmt::join(task_kind_names(), ", ")))->capture_default_str();
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
    auto* schedule = cmd->add_option("--schedule", args->schedule_id, "schedule id (method kascade)");
    auto* method =
        cmd->add_option("--method", args->method, "dense | oracle | streaming | quest (instead of --schedule)");
    schedule->excludes(method);
    args->topk.add_to(*cmd);
    cmd->add_option("--pooling", args->pooling, "post_softmax (default) or pre_softmax: what ranks keys");
    check_range(cmd->add_option("--tile", args->tile,
                                fmt::format("tokens per tile (default: the schedule's capture tile, else {})",
                                            EvalParams::kDefaultTile)),
                1);
    auto* page_size =
        check_range(cmd->add_option("--page-size", args->page_size, "quest: keys per page")->capture_default_str(), 1);
    cmd->add_flag("--show-prompt", args->show_prompt,
                  "print the prompt of the first sample (first length and depth) and its expected answer; run nothing");
    cmd->add_flag("--json", args->json, "print one JSON object: run_ids, score, by_length (length -> score), ...");
    cmd->callback([args, schedule, method, depth_pcts, page_size, &common] {
        KASCADE_USAGE_CHECK(schedule->count() + method->count() == 1, "task needs --schedule ID or --method NAME");
        TaskParams p;
        p.task = parse_task_kind(args->task, "--task");
        p.lengths = args->lengths;
        p.depths_pct = depth_pcts->count() ? args->depth_pcts : evenly_spaced_depths(args->depths);
        p.samples = args->samples;
        p.seed = args->seed;
        p.haystack = args->haystack;
        p.max_new_tokens = args->max_new_tokens;
        p.prefill = parse_task_prefill(args->prefill, "--prefill");
        EvalParams& m = p.method;
        m.method = schedule->count() ? EvalMethod::Kascade : parse_eval_method(args->method, "--method");
        if (schedule->count()) m.schedule_id = args->schedule_id;
        KASCADE_USAGE_CHECK(m.method == EvalMethod::Dense || m.method == EvalMethod::Kascade || args->topk.given(),
                            "--method {} needs a key budget: --topk-tiles N or --topk-pct P", args->method);
        KASCADE_USAGE_CHECK(page_size->count() == 0 || m.method == EvalMethod::Quest,
                            "--page-size applies to --method quest");
        const TopKRule rule = args->topk.rule();
        if (args->topk.given()) m.topk = rule;
        m.granularity = args->topk.key_granularity();
        if (!args->pooling.empty()) m.pooling = parse_pooling(args->pooling, "--pooling");
        m.tile = args->tile;
        m.quest_page = args->page_size;

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
        ProgressLine progress(fmt::format("task {} {}", args->task, eval_method_name(m.method)), total, "samples");
        const TaskSummary s = run_task(ws, model, p, [&](int done, int) { progress.update(done); });
        progress.finish();
        print_summary(s, p, args->json);
    });
}

}  // namespace kascade::cli
