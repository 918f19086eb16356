// pipeline/cli/topk_options.h: --topk-tiles / --topk-pct / --k-min, shared by similarity and eval.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

#include "kernels/attention_types.h"
#include "pipeline/cli/option_range.h"

namespace kascade::cli {

struct TopKOptions {
    int tiles = 0;
    float pct = 0;
    int k_min = 128;

    void add_to(CLI::App& command) {
        auto* t = check_range(command.add_option("--topk-tiles", tiles, "keep this many key tiles per query tile"), 1);
        auto* p = check_range(command.add_option("--topk-pct", pct, "keep this % of the causal context (paper: 10)"), 0,
                              100, /*min_open=*/true);
        t->excludes(p);
        check_range(command.add_option("--k-min", k_min, "with --topk-pct: keep at least this many tokens")
                        ->capture_default_str(),
                    1);
    }
    bool given() const { return tiles > 0 || pct > 0; }
    TopKRule rule() const { return TopKRule{tiles, pct, k_min}; }
};

}  // namespace kascade::cli
