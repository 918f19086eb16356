// kascade capture: stage 1, dense forward on the calibration tokens into an HDF5 artifact.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "pipeline/cli/commands.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/stages/capture_stage.h"

namespace kascade::cli {

namespace {
struct CaptureArgs {
    ModelArgs model;
    std::string text;
    CaptureParams params;
    bool force = false;
    bool json = false;
};
}  // namespace

void register_capture_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<CaptureArgs>();
    CLI::App* cmd = app.add_subcommand("capture", "Stage 1: record each layer's pooled attention on calibration text");
    cmd->footer(
        "Writes <results>/artifacts/capture/<key>.h5 and prints its key.\n"
        "Example:\n"
        "  kascade capture --model models/stories260K/stories260K.bin --text TinyStories-valid.head.txt "
        "--calib-tokens 8192 --ctx 512 --tile 16");
    args->model.add_to(*cmd);
    cmd->add_option("--text", args->text, "text file (its calibration range is used)")->required();
    check_range(cmd->add_option("--calib-tokens", args->params.n_tokens, "calibration tokens (whole windows only)")
                    ->capture_default_str(),
                param_range::kTokenCount);
    check_range(
        cmd->add_option("--offset", args->params.token_offset, "first calibration token")->capture_default_str(),
        param_range::kTokenOffset);
    check_range(
        cmd->add_option("--ctx", args->params.ctx, "positions per window (BOS included)")->capture_default_str(),
        param_range::kCtx);
    check_range(cmd->add_option("--tile", args->params.tile, "tokens per tile")->capture_default_str(),
                param_range::kTile);
    cmd->add_flag("--save-qk", args->params.save_qk, "also store post-RoPE Q and K");
    cmd->add_flag("--force", args->force, "recompute even if the artifact exists");
    cmd->add_flag("--json", args->json, "print one JSON object: capture_key, cached");
    cmd->callback([args, &common] {
        Workspace ws(common.results_dir);
        LoadedModel& model = ws.model(args->model.model, args->model.tokenizer);
        LoadedText& text = ws.text(args->text, model);
        const StageResult r = run_capture(ws, model, text, args->params, args->force);
        if (args->json) {
            std::printf("%s\n", nlohmann::json{{"capture_key", r.key}, {"cached", r.cached}}.dump().c_str());
        } else {
            std::printf("capture %s%s\n", r.key.c_str(), r.cached ? " (cached)" : "");
        }
    });
}

}  // namespace kascade::cli
