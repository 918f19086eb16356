// kascade similarity: stage 2, layer-pair tile similarity from a capture.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/topk_options.h"
#include "pipeline/stages/similarity_stage.h"

namespace kascade::cli {

namespace {
struct SimilarityArgs {
    std::string capture;
    TopKOptions topk;
    bool force = false;
    bool json = false;
};
}  // namespace

void register_similarity_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<SimilarityArgs>();
    CLI::App* cmd = app.add_subcommand("similarity", "Stage 2: how well each layer's top-k tiles serve later layers");
    cmd->footer(
        "Writes <results>/artifacts/similarity/<key>.h5 and prints its key.\n"
        "Example:\n"
        "  kascade similarity --capture 3f2a9c0d1e4b5a67 --topk-tiles 8 --key-granularity tile\n"
        "  kascade similarity --capture 3f2a9c0d1e4b5a67 --topk-pct 10   # token granularity: needs capture --save-qk");
    cmd->add_option("--capture", args->capture, "capture key (printed by `kascade capture`, listed by status)")
        ->required();
    args->topk.add_to(*cmd);
    cmd->add_flag("--force", args->force, "recompute even if the artifact exists");
    cmd->add_flag("--json", args->json, "print one JSON object: similarity_key, cached");
    cmd->callback([args, &common] {
        KASCADE_USAGE_CHECK(args->topk.given(), "similarity needs --topk-tiles N or --topk-pct P");
        Workspace ws(common.results_dir);
        const StageResult r =
            run_similarity(ws, args->capture, args->topk.rule(),
                           args->topk.key_granularity().value_or(SparseAttentionOptions{}.granularity), args->force);
        if (args->json) {
            std::printf("%s\n", nlohmann::json{{"similarity_key", r.key}, {"cached", r.cached}}.dump().c_str());
        } else {
            std::printf("similarity %s%s\n", r.key.c_str(), r.cached ? " (cached)" : "");
        }
    });
}

}  // namespace kascade::cli
