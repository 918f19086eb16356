// pipeline/cli/method_options.h: the attention-method options eval, generate and task share (--schedule or --method,
// the key budget, tile, pooling, quest's page size, the baselines' layers) and the one step from them to the method
// part of EvalParams, with every check of how the options combine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "pipeline/cli/baseline_layer_options.h"
#include "pipeline/cli/option_range.h"
#include "pipeline/cli/topk_options.h"
#include "pipeline/stages/eval_stage.h"

namespace kascade::cli {

struct MethodOptions {
    int64_t schedule_id = 0;
    std::string method;
    TopKOptions topk;
    BaselineLayerOptions layers;
    std::optional<int> tile;
    std::string pooling;
    int page_size = EvalParams{}.quest_page;
    CLI::Option* schedule_option = nullptr;
    CLI::Option* method_option = nullptr;
    CLI::Option* page_size_option = nullptr;

    /// `default_method`: what a command without --schedule and --method runs (generate: dense), shown in the help.
    void add_to(CLI::App& command, std::optional<EvalMethod> default_method = std::nullopt) {
        schedule_option = command.add_option("--schedule", schedule_id,
                                             "a stored Kascade schedule's id (method kascade; `kascade status` lists "
                                             "them)");
        if (default_method) method = mode_name(*default_method);
        method_option = command.add_option("--method", method,
                                           "dense | oracle | streaming | quest | omnikv | lessismore (instead of "
                                           "--schedule)");
        if (default_method) method_option->capture_default_str();
        schedule_option->excludes(method_option);
        topk.add_to(command);
        layers.add_to(command);
        check_range(command.add_option("--tile", tile,
                                       fmt::format("tokens per tile (default: the schedule's capture tile, else {})",
                                                   EvalParams::kDefaultTile)),
                    1);
        command.add_option("--pooling", pooling,
                           "what ranks keys: post_softmax (the paper: summed probabilities; the default) or "
                           "pre_softmax (max raw score)");
        page_size_option =
            check_range(command.add_option("--page-size", page_size, "quest: keys per page")->capture_default_str(), 1);
        default_method_ = default_method;
    }

    /// Sets the method part of p (method, schedule, key budget, tile, granularity, pooling, page size, layers) from
    /// the options given; refuses a missing method, a sparse method without a key budget and the options of another
    /// method. `command` names the command in the messages.
    void apply_to(EvalParams& p, std::string_view command) const {
        const bool has_schedule = schedule_option->count() > 0;
        KASCADE_USAGE_CHECK(default_method_ || has_schedule || method_option->count() > 0,
                            "{} needs --schedule ID or --method NAME", command);
        p.method = has_schedule ? EvalMethod::Kascade : parse_mode<EvalMethod>(method, "--method");
        KASCADE_USAGE_CHECK(has_schedule || p.method != EvalMethod::Kascade,
                            "--method kascade needs --schedule ID (see `kascade status`)");
        if (has_schedule) p.schedule_id = schedule_id;
        KASCADE_USAGE_CHECK(p.method == EvalMethod::Dense || p.method == EvalMethod::Kascade || topk.given(),
                            "--method {} needs a key budget: --topk-tiles N or --topk-pct P", method);
        KASCADE_USAGE_CHECK(page_size_option->count() == 0 || p.method == EvalMethod::Quest,
                            "--page-size applies to --method quest");
        const TopKRule rule = topk.rule();
        if (topk.given()) p.topk = rule;
        p.granularity = topk.key_granularity();
        if (!pooling.empty()) p.pooling = parse_mode<Pooling>(pooling, "--pooling");
        layers.apply(p, method);
        p.tile = tile;
        p.quest_page = page_size;
    }

  private:
    std::optional<EvalMethod> default_method_;
};

}  // namespace kascade::cli
