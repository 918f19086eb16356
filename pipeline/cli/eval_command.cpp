// kascade eval: stage 4, sparse perplexity against dense on the test tokens, logged as a run.
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/cli/topk_options.h"
#include "pipeline/stages/eval_stage.h"

namespace kascade::cli {

namespace {
struct EvalArgs {
    ModelArgs model;
    std::string text;
    int64_t schedule_id = 0;
    std::string method;
    TopKOptions topk;
    std::optional<int> tile;
    std::optional<int64_t> offset;
    EvalParams params;
    std::string pooling;
    bool force = false;
};
}  // namespace

void register_eval_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<EvalArgs>();
    CLI::App* cmd = app.add_subcommand("eval", "Stage 4: perplexity with sparse attention vs dense, logged as a run");
    cmd->footer(
        "Prints the run's metrics; `kascade query show ID` shows everything stored about it.\n"
        "Examples:\n"
        "  kascade eval --model models/stories260K/stories260K.bin --text TinyStories-valid.head.txt --schedule 3\n"
        "  kascade eval --model models/stories260K/stories260K.bin --text TinyStories-valid.head.txt "
        "--method oracle --topk-tiles 8 --offset 8192 --eval-tokens 8192");
    args->model.add_to(*cmd);
    cmd->add_option("--text", args->text, "text file (its test range is scored)")->required();
    auto* schedule = cmd->add_option("--schedule", args->schedule_id, "schedule id (method kascade)");
    auto* method = cmd->add_option("--method", args->method, "dense | oracle | streaming (instead of --schedule)");
    schedule->excludes(method);
    args->topk.add_to(*cmd);
    cmd->add_option("--pooling", args->pooling,
                    "what ranks keys: post_softmax (the paper: summed probabilities) or pre_softmax (max raw score); "
                    "default post_softmax");
    check_range(
        cmd->add_option("--tile", args->tile, "tokens per tile (default: the schedule's capture tile, else 16)"), 1);
    check_range(
        cmd->add_option("--ctx", args->params.ctx, "positions per window (BOS included)")->capture_default_str(), 2);
    check_range(cmd->add_option("--eval-tokens", args->params.n_tokens, "test tokens to score (0: all after --offset)")
                    ->capture_default_str(),
                0);
    check_range(cmd->add_option("--offset", args->offset,
                                "first test token (default: right after the schedule's calibration range, else 0)"),
                0);
    cmd->add_flag("--force", args->force, "re-run even if an identical run is stored");
    cmd->callback([args, schedule, method, &common] {
        KASCADE_CHECK(schedule->count() + method->count() == 1, "eval needs --schedule ID or --method NAME");
        EvalParams p = args->params;
        p.method = schedule->count() ? "kascade" : args->method;
        if (schedule->count()) p.schedule_id = args->schedule_id;
        const TopKRule rule = args->topk.rule();
        if (args->topk.given()) p.topk = rule;
        p.granularity = args->topk.key_granularity();
        if (!args->pooling.empty()) p.pooling = parse_pooling(args->pooling, "--pooling");
        p.tile = args->tile;
        p.token_offset = args->offset;
        Workspace ws(common.results_dir);
        LoadedModel& model = ws.model(args->model.model, args->model.tokenizer);
        LoadedText& text = ws.text(args->text, model);
        const EvalResult r = run_eval(ws, model, text, p, args->force);
        const RunDetails run = ws.db().load_run(r.run_id);
        std::printf("run %lld%s  method %s  ppl %.4f (dense %.4f, %+.3f%%)  density %.4f  %.0f tokens/s\n",
                    static_cast<long long>(r.run_id), r.cached ? " (cached)" : "", run.run.method.c_str(),
                    run.metrics.ppl_sparse, run.metrics.ppl_dense.value_or(0), run.metrics.degradation_pct.value_or(0),
                    run.metrics.density, run.metrics.tokens_per_s.value_or(0));
    });
}

}  // namespace kascade::cli
