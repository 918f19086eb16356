// kascade random-model: a randomly initialised checkpoint at the shape of a real config.json.
#include <cstdio>
#include <string>

#include "base/error.h"
#include "io/weights/random_checkpoint.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/cli/output_guard.h"

namespace kascade::cli {

namespace {
struct RandomModelArgs {
    std::string config;
    std::string out;
    RandomCheckpointOptions options;
    std::string dtype = "bf16";
    bool force = false;
};
}  // namespace

void register_random_model_command(CLI::App& app) {
    auto args = std::make_shared<RandomModelArgs>();
    CLI::App* cmd = app.add_subcommand(
        "random-model", "Write a model with random weights for a config.json (speed and mechanics studies)");
    cmd->footer(
        "The weights are random: perplexities mean nothing, but the shapes, memory and speed are the real model's.\n"
        "Example:\n"
        "  kascade random-model --config models/configs/llama-3.2-1b/config.json --out /tmp/llama32-1b-random");
    cmd->add_option("--config", args->config, "a Hugging Face config.json of a supported family")->required();
    cmd->add_option("--out", args->out, "folder to write config.json and model.safetensors into")->required();
    check_range(cmd->add_option("--layers", args->options.layers, "number of layers to write (default: the config's)"),
                1, std::numeric_limits<int>::max());
    cmd->add_option("--seed", args->options.seed, "random seed")->capture_default_str();
    cmd->add_option("--dtype", args->dtype, "stored dtype: bf16, f16 or f32")->capture_default_str();
    cmd->add_flag("--force", args->force, "replace a config.json or model.safetensors already in --out");
    cmd->callback([args] {
        args->options.dtype = parse_mode<DType>(args->dtype, "--dtype");
        check_may_write_files("--out", args->out, {"config.json", "model.safetensors"}, args->force);
        write_random_checkpoint(args->config, args->out, args->options);
        std::printf("%s\n", args->out.c_str());
    });
}

}  // namespace kascade::cli
