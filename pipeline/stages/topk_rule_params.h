// pipeline/stages/topk_rule_params.h: a top-k rule (kernels/attention_types.h) as the stages take it from a user and
// store it: the checks of a rule given on the command line or in a sweep file, and its form in content keys and
// artifact parameters. Shared by the similarity stage, eval and the task stages.
#pragma once

#include <nlohmann/json.hpp>

#include "kernels/attention_types.h"

namespace kascade {

/// Checks a top-k rule given on the command line or in a sweep: exactly one of tiles / pct, in range.
void check_topk_rule(const TopKRule& rule);

/// The rule as stored in content keys and artifact parameters: topk_tiles, or topk_pct + k_min + k_rule; round_k.
nlohmann::json topk_rule_json(const TopKRule& rule);

}  // namespace kascade
