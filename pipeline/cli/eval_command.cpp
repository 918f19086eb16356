// kascade eval: stage 4, sparse perplexity against dense on the test tokens, logged as a run.
#include <cstdio>
#include <optional>

#include "base/error.h"
#include "pipeline/cli/baseline_layer_options.h"
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
    std::string phase{mode_name(EvalParams{}.phase)};
    TopKOptions topk;
    BaselineLayerOptions layers;
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
        "--method oracle --topk-tiles 8 --offset 8192 --eval-tokens 8192\n"
        "  kascade eval --model models/stories260K/stories260K.bin --text TinyStories-valid.head.txt "
        "--method quest --topk-pct 10 --k-min 32 --phase decode --prompt-tokens 256 --decode-tokens 256\n"
        "  kascade eval --model models/stories260K/stories260K.bin --text TinyStories-valid.head.txt "
        "--method omnikv --filter-layers 2 --topk-tiles 4 --phase decode --offset 8687 --eval-tokens 2048");
    args->model.add_to(*cmd);
    cmd->add_option("--text", args->text, "text file (its test range is scored)")->required();
    auto* schedule = cmd->add_option("--schedule", args->schedule_id, "schedule id (method kascade)");
    auto* method = cmd->add_option("--method", args->method,
                                   "dense | oracle | streaming | quest | omnikv | lessismore (instead of --schedule)");
    schedule->excludes(method);
    args->topk.add_to(*cmd);
    args->layers.add_to(*cmd);
    cmd->add_option("--pooling", args->pooling,
                    "what ranks keys: post_softmax (the paper: summed probabilities) or pre_softmax (max raw score); "
                    "default post_softmax");
    check_range(cmd->add_option("--tile", args->tile,
                                fmt::format("tokens per tile (default: the schedule's capture tile, else {})",
                                            EvalParams::kDefaultTile)),
                1);
    auto* ctx = check_range(cmd->add_option("--ctx", args->params.ctx, "prefill: positions per window (BOS included)")
                                ->capture_default_str(),
                            2);
    check_range(cmd->add_option("--eval-tokens", args->params.n_tokens, "test tokens to score (0: all after --offset)")
                    ->capture_default_str(),
                0);
    check_range(cmd->add_option("--offset", args->offset,
                                "first test token (default: right after the schedule's calibration range, else 0)"),
                0);
    cmd->add_option("--phase", args->phase,
                    "prefill (perplexity windows of --ctx) or decode (a dense prefill of --prompt-tokens, then "
                    "--decode-tokens scored one at a time through the method)")
        ->capture_default_str();
    auto* prompt_tokens = check_range(cmd->add_option("--prompt-tokens", args->params.prompt_tokens,
                                                      "decode: positions prefilled densely per window (BOS included)")
                                          ->capture_default_str(),
                                      1);
    auto* decode_tokens = check_range(
        cmd->add_option("--decode-tokens", args->params.decode_tokens,
                        "decode: tokens then fed one at a time per window, each next-token prediction scored")
            ->capture_default_str(),
        1);
    auto* page_size = check_range(
        cmd->add_option("--page-size", args->params.quest_page, "quest: keys per page")->capture_default_str(), 1);
    cmd->add_flag("--force", args->force, "re-run even if an identical run is stored");
    cmd->callback([args, schedule, method, ctx, prompt_tokens, decode_tokens, page_size, &common] {
        KASCADE_USAGE_CHECK(schedule->count() + method->count() == 1, "eval needs --schedule ID or --method NAME");
        EvalParams p = args->params;
        p.method = schedule->count() ? EvalMethod::Kascade : parse_mode<EvalMethod>(args->method, "--method");
        if (schedule->count()) p.schedule_id = args->schedule_id;
        p.phase = parse_mode<EvalPhase>(args->phase, "--phase");
        // Options of the other phase or method would be ignored: refuse them rather than run something else.
        if (p.phase == EvalPhase::Decode) {
            KASCADE_USAGE_CHECK(
                ctx->count() == 0,
                "--ctx applies to --phase prefill; a decode window is --prompt-tokens + --decode-tokens");
        } else {
            KASCADE_USAGE_CHECK(prompt_tokens->count() + decode_tokens->count() == 0,
                                "--prompt-tokens and --decode-tokens apply to --phase decode");
        }
        KASCADE_USAGE_CHECK(page_size->count() == 0 || p.method == EvalMethod::Quest,
                            "--page-size applies to --method quest");
        const TopKRule rule = args->topk.rule();
        if (args->topk.given()) p.topk = rule;
        p.granularity = args->topk.key_granularity();
        if (!args->pooling.empty()) p.pooling = parse_mode<Pooling>(args->pooling, "--pooling");
        args->layers.apply(p, args->method);
        p.tile = args->tile;
        p.token_offset = args->offset;
        Workspace ws(common.results_dir);
        LoadedModel& model = ws.model(args->model.model, args->model.tokenizer);
        LoadedText& text = ws.text(args->text, model);
        const EvalResult r = run_eval(ws, model, text, p, args->force);
        const RunDetails run = ws.db().load_run(r.run_id);
        std::printf("run %lld%s  method %s  %s  ppl %.4f (dense %.4f, %+.3f%%)  density %.4f  %.0f %stokens/s\n",
                    static_cast<long long>(r.run_id), r.cached ? " (cached)" : "", run.run.method.c_str(),
                    run.run.phase.c_str(), run.metrics.ppl_sparse, run.metrics.ppl_dense.value_or(0),
                    run.metrics.degradation_pct.value_or(0), run.metrics.density, run.metrics.tokens_per_s.value_or(0),
                    p.phase == EvalPhase::Decode ? "decode " : "");
    });
}

}  // namespace kascade::cli
