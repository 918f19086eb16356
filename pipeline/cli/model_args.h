// pipeline/cli/model_args.h: the --model / --tokenizer options most subcommands share, and loading them.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"
#include "kernels/matmul.h"
#include "pipeline/runtime/perplexity.h"

namespace kascade::cli {

struct ModelArgs {
    std::string model;
    std::string tokenizer;  ///< empty: the tokenizer found next to the model
    std::string weights_dtype = std::string(mode_name(LoadOptions{}.weights_dtype));
    std::string matmul{mode_name(MatmulPrecision::Exact)};
    std::string kv_dtype{mode_name(PerplexityOptions{}.kv_dtype)};

    void add_to(CLI::App& command, bool model_required = true);
    /// --weights-dtype and the numerics (--matmul, --kv-dtype), for the commands that run the model directly (the
    /// stages use the file's dtype).
    void add_runtime_options_to(CLI::App& command);
    /// The numerics alone (--matmul, --kv-dtype), for the stages that store what they measure (eval, task): they
    /// enter the run's key.
    void add_numerics_options_to(CLI::App& command);

    /// The load options of --weights-dtype (checked: an unknown value names the option and the choices).
    LoadOptions load_options() const;
    /// The precision of --matmul (checked likewise).
    MatmulPrecision matmul_precision() const;
    /// The KV cache's element type of --kv-dtype (checked likewise).
    KvDType kv_cache_dtype() const;
};

/// The tokenizer given with --tokenizer, or the one beside the model; an error says where it looked.
std::unique_ptr<Tokenizer> load_tokenizer_for(const ModelArgs& args);

}  // namespace kascade::cli
