#include "pipeline/stages/topk_rule_params.h"

#include "base/enum_names.h"
#include "base/error.h"

namespace kascade {

void check_topk_rule(const TopKRule& rule) {
    KASCADE_CHECK((rule.tiles > 0) != (rule.pct > 0),
                  "give exactly one of topk-tiles (> 0) and topk-pct (in (0, 100]); got topk-tiles={} topk-pct={}",
                  rule.tiles, rule.pct);
    KASCADE_CHECK(rule.pct >= 0 && rule.pct <= 100, "invalid topk-pct={} (must be in (0, 100])", rule.pct);
    KASCADE_CHECK(rule.tiles >= 0, "invalid topk-tiles={} (must be > 0)", rule.tiles);
    KASCADE_CHECK(rule.k_min_tokens >= 0, "invalid k-min={} (must be >= 0 tokens)", rule.k_min_tokens);
    KASCADE_CHECK(rule.round_k >= 0, "invalid round-k={} (must be >= 0 tokens; 0 = no rounding)", rule.round_k);
}

nlohmann::json topk_rule_json(const TopKRule& rule) {
    nlohmann::json j = rule.tiles > 0 ? nlohmann::json{{"topk_tiles", rule.tiles}}
                                      : nlohmann::json{{"topk_pct", rule.pct},
                                                       {"k_min", rule.k_min_tokens},
                                                       {"k_rule", std::string(mode_name(rule.k_rule))}};
    j["round_k"] = rule.round_k;
    return j;
}

}  // namespace kascade
