// pipeline/cli/baseline_layer_options.h: --filter-layers (omnikv), --selection-layers and --window-ratio
// (lessismore), shared by eval, generate and task. The window ratio's default is LessIsMoreOptions's; the layer lists
// have none (as in the Kascade paper's code, which requires them).
#pragma once

#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/stages/eval_stage.h"

namespace kascade::cli {

struct BaselineLayerOptions {
    std::vector<int> filter_layers;
    std::vector<int> selection_layers;
    double window_ratio = EvalParams{}.window_ratio;
    CLI::Option* filter_option = nullptr;
    CLI::Option* selection_option = nullptr;
    CLI::Option* ratio_option = nullptr;

    void add_to(CLI::App& command) {
        filter_option = check_range(command
                                        .add_option("--filter-layers", filter_layers,
                                                    "omnikv: its filter layers, ascending, from 2 (the Kascade "
                                                    "paper's for Llama-3.1-8B: 2,8,18)")
                                        ->delimiter(','),
                                    param_range::kLayer);
        selection_option = check_range(command
                                           .add_option("--selection-layers", selection_layers,
                                                       "lessismore: its selection layers, ascending (the Kascade "
                                                       "paper's for Llama-3.1-8B: 2,13)")
                                           ->delimiter(','),
                                       param_range::kLayer);
        ratio_option = check_range(
            command
                .add_option("--window-ratio", window_ratio,
                            "lessismore: share of the key budget for the 4 sink tokens and the most recent keys")
                ->capture_default_str(),
            param_range::kWindowRatio);
    }

    /// Puts the options of `method` into p (p.method, p.pooling and p.granularity set as the user gave them),
    /// refusing those of another method, a missing list, and a pooling or tile granularity OmniKV and LessIsMore
    /// would ignore (they rank single keys in their own way).
    void apply(EvalParams& p, std::string_view method_name) const {
        const bool omnikv = p.method == EvalMethod::OmniKv, lessismore = p.method == EvalMethod::LessIsMore;
        KASCADE_USAGE_CHECK(!(omnikv || lessismore) || !p.pooling,
                            "--pooling does not apply to --method {}: it ranks keys in its own way", method_name);
        KASCADE_USAGE_CHECK(
            !(omnikv || lessismore) || p.granularity.value_or(KeyGranularity::Token) == KeyGranularity::Token,
            "--method {} selects single keys: --key-granularity tile does not apply to it", method_name);
        KASCADE_USAGE_CHECK(filter_option->count() == 0 || omnikv, "--filter-layers applies to --method omnikv");
        KASCADE_USAGE_CHECK(selection_option->count() + ratio_option->count() == 0 || lessismore,
                            "--selection-layers and --window-ratio apply to --method lessismore");
        KASCADE_USAGE_CHECK(!omnikv || filter_option->count() > 0,
                            "--method {} needs --filter-layers L,L,... (the Kascade paper's for Llama-3.1-8B: 2,8,18)",
                            method_name);
        KASCADE_USAGE_CHECK(!lessismore || selection_option->count() > 0,
                            "--method {} needs --selection-layers L,L,... (the Kascade paper's for Llama-3.1-8B: 2,13)",
                            method_name);
        if (omnikv) p.selection_layers = filter_layers;
        if (lessismore) {
            p.selection_layers = selection_layers;
            p.window_ratio = window_ratio;
        }
    }
};

}  // namespace kascade::cli
