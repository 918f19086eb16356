// pipeline/cli/model_args.h: the --model / --tokenizer options most subcommands share, and loading them.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"

namespace kascade::cli {

struct ModelArgs {
    std::string model;
    std::string tokenizer;  ///< empty: the tokenizer found next to the model

    void add_to(CLI::App& command, bool model_required = true);
};

/// The tokenizer given with --tokenizer, or the one beside the model; an error says where it looked.
std::unique_ptr<Tokenizer> load_tokenizer_for(const ModelArgs& args);

}  // namespace kascade::cli
