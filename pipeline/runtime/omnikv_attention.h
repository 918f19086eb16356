// pipeline/runtime/omnikv_attention.h: the OmniKV baseline (Hao et al., ICLR 2025), a decode-time method, as the
// Kascade paper's code runs it (microsoft/kascade, src/strategies/OmniKVStrategy.py).
//
// At each decode step a *filter layer* attends densely and picks one set of keys for all heads: the softmax
// probabilities of the new token over every key it sees, maximised over all query heads, keep their top-k. The layers
// after it, up to the next filter layer, attend only that set (plus the query's own tile, as every method here) in
// every head. Layers 0 and 1 and the layer right after each filter layer attend densely, as in the reference
// (`layer_idx in [0, 1] or layer_idx - 1 in recompute_layers`); so do the layers before the first filter layer. The
// budget is Kascade's decode budget in keys (kernels/decode_scoring.h: decode_token_budget, chosen among the keys
// before the query's tile), so OmniKV is compared at the same density as the other methods. A prefill runs dense
// attention in every layer: OmniKV selects only for generated tokens.
#pragma once

#include <string_view>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/shared_key_set.h"

namespace kascade {

struct OmniKvOptions {
    int tile = 16;  ///< the query's own tile is always attended; the budget is chosen before it
    TopKRule topk;  ///< budget in keys (decode_token_budget)
    std::vector<int>
        filter_layers;     ///< ascending, from dense_layers on, no two adjacent (the reference's recompute_layers_o)
    int dense_layers = 2;  ///< layers 0 .. dense_layers - 1 attend densely (the reference's [0, 1])
};

/// KASCADE_CHECK that `filter_layers` suit a model of n_layers: not empty, ascending, each in [dense_layers,
/// n_layers), no two adjacent (the layer after a filter layer attends densely, so it would never filter). `option`
/// names the list in the messages.
void check_omnikv_filter_layers(const std::vector<int>& filter_layers, int n_layers, std::string_view option,
                                int dense_layers = OmniKvOptions{}.dense_layers);

class OmniKvAttention : public AttentionPolicy {
  public:
    OmniKvAttention(int n_layers, OmniKvOptions options);

    void attend(const AttentionCall& call) override;
    /// "dense", "filter" (attends densely, picks the set) or "reuse" (attends the last filter layer's set).
    RunLayerRole layer_role(int layer) const override;

    /// Keys attended per layer since construction (or the last reset_density()).
    const std::vector<LayerDensity>& layer_density() const { return density_; }
    void reset_density();

    /// The keys the filter layer `layer` picked in the last decode call (one KV head, ascending).
    const TokenSelection& selection(int layer) const { return sets_[layer].selection(); }

  private:
    enum class Role { Dense, Filter, Reuse };

    OmniKvOptions options_;
    std::vector<Role> roles_;
    std::vector<int> source_;  ///< [layer] the filter layer a reuse layer reads
    std::vector<SharedKeySet> sets_;
    std::vector<LayerDensity> density_;
    std::vector<float> probabilities_;
};

}  // namespace kascade
