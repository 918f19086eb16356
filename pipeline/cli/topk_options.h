// pipeline/cli/topk_options.h: --topk-tiles / --topk-pct / --k-min / --k-rule / --round-k and --key-granularity,
// shared by similarity and eval. Defaults are those of TopKRule and SparseAttentionOptions.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "kernels/attention_types.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/runtime/kascade_attention.h"

namespace kascade::cli {

struct TopKOptions {
    int tiles = 0;
    float pct = 0;
    int k_min = TopKRule{}.k_min_tokens;
    std::string k_rule{mode_name(TopKRule{}.k_rule)};
    int round_k = TopKRule{}.round_k;
    std::string granularity;  ///< empty: the command's default
    CLI::Option* k_rule_option = nullptr;
    CLI::Option* round_k_option = nullptr;

    void add_to(CLI::App& command) {
        auto* t = check_range(command.add_option("--topk-tiles", tiles, "keep this many key tiles per query tile"),
                              param_range::kTopKTiles);
        auto* p = check_range(
            command.add_option("--topk-pct", pct, "keep this % of the context that --k-rule names (paper: 10)"),
            param_range::kTopKPct);
        t->excludes(p);
        check_range(command.add_option("--k-min", k_min, "with --topk-pct: keep at least this many tokens")
                        ->capture_default_str(),
                    param_range::kKMin);
        k_rule_option = command
                            .add_option("--k-rule", k_rule,
                                        "with --topk-pct: sequence (the paper: p% of the whole sequence, minus the "
                                        "tile), rolling (the paper's rolling prefill: p% of the tile's start), or "
                                        "visible (p% of the keys the tile's last query sees)")
                            ->capture_default_str();
        round_k_option = check_range(
            command.add_option("--round-k", round_k, "round k up to a multiple of this many tokens (0: no rounding)")
                ->capture_default_str(),
            param_range::kRoundK);
        command.add_option("--key-granularity", granularity,
                           "token (the paper: individual keys) or tile (whole key tiles; the first CPU prototype)");
    }
    bool given() const { return tiles > 0 || pct > 0; }
    TopKRule rule() const {
        KASCADE_USAGE_CHECK(given() || (k_rule_option->count() == 0 && round_k_option->count() == 0),
                            "--k-rule and --round-k need --topk-tiles N or --topk-pct P");
        return TopKRule{tiles, pct, k_min, parse_mode<KRule>(k_rule, "--k-rule"), round_k};
    }
    std::optional<KeyGranularity> key_granularity() const {
        if (granularity.empty()) return std::nullopt;
        return parse_mode<KeyGranularity>(granularity, "--key-granularity");
    }
};

}  // namespace kascade::cli
