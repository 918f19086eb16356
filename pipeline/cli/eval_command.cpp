// kascade eval: stage 4, sparse perplexity against dense on the test tokens, logged as a run.
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/method_options.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/stages/eval_stage.h"

namespace kascade::cli {

namespace {
struct EvalArgs {
    ModelArgs model;
    std::string text;
    MethodOptions method;
    std::string phase{mode_name(EvalParams{}.phase)};
    std::optional<int64_t> offset;
    EvalParams params;  ///< the window and token options
    bool force = false;
    bool json = false;
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
    args->model.add_numerics_options_to(*cmd);
    cmd->add_option("--text", args->text, "text file (its test range is scored)")->required();
    args->method.add_to(*cmd);
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
    cmd->add_flag("--force", args->force, "re-run even if an identical run is stored");
    cmd->add_flag("--json", args->json,
                  "print one JSON object: run_id, run_key, cached, method, phase, matmul, kv_dtype, ppl, ppl_dense, "
                  "degradation_pct, density, tokens_per_s");
    cmd->callback([args, ctx, prompt_tokens, decode_tokens, &common] {
        EvalParams p = args->params;
        args->method.apply_to(p, "eval");
        p.matmul = args->model.matmul_precision();
        p.kv_dtype = args->model.kv_cache_dtype();
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
        p.token_offset = args->offset;
        Workspace ws(common.results_dir);
        LoadedModel& model = ws.model(args->model.model, args->model.tokenizer);
        LoadedText& text = ws.text(args->text, model);
        const EvalResult r = run_eval(ws, model, text, p, args->force);
        const RunDetails run = ws.db().load_run(r.run_id);
        if (args->json) {
            const nlohmann::json out = {{"run_id", r.run_id},
                                        {"run_key", run.run.key},
                                        {"cached", r.cached},
                                        {"method", run.run.method},
                                        {"phase", run.run.phase},
                                        {"matmul", run.run.matmul},
                                        {"kv_dtype", run.run.kv_dtype},
                                        {"ppl", run.metrics.ppl_sparse},
                                        {"ppl_dense", run.metrics.ppl_dense.value_or(run.metrics.ppl_sparse)},
                                        {"degradation_pct", run.metrics.degradation_pct.value_or(0)},
                                        {"density", run.metrics.density},
                                        {"tokens_per_s", run.metrics.tokens_per_s.value_or(0)}};
            std::printf("%s\n", out.dump().c_str());
            return;
        }
        std::printf("run %lld%s  method %s  %s  ppl %.4f (dense %.4f, %+.3f%%)  density %.4f  %.0f %stokens/s\n",
                    static_cast<long long>(r.run_id), r.cached ? " (cached)" : "", run.run.method.c_str(),
                    run.run.phase.c_str(), run.metrics.ppl_sparse, run.metrics.ppl_dense.value_or(0),
                    run.metrics.degradation_pct.value_or(0), run.metrics.density, run.metrics.tokens_per_s.value_or(0),
                    p.phase == EvalPhase::Decode ? "decode " : "");
    });
}

}  // namespace kascade::cli
