// pipeline/runtime/omnikv_attention.h: the OmniKV baseline (Hao et al., ICLR 2025), a decode-time method, as the
// Kascade paper's code runs it (microsoft/kascade, src/strategies/OmniKVStrategy.py).
//
// At each decode step a *filter layer* attends densely and picks one set of keys for all heads: the softmax
// probabilities of the new token over every key it sees, maximised over all query heads, keep their top-k. The layers
// after it, up to the next filter layer, attend only that set in every head (pipeline/runtime/shared_set_attention.h,
// with the budget and the prefill). Layers 0 and 1 and the layer right after each filter layer attend densely, as in
// the reference (`layer_idx in [0, 1] or layer_idx - 1 in recompute_layers`); so do the layers before the first
// filter layer.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/shared_set_attention.h"

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

/// The selecting layers are the filter layers (layer_role "filter"); the layers after one, up to the next, read its
/// set, except the layer right after it.
class OmniKvAttention : public SharedSetAttention {
  public:
    OmniKvAttention(int n_layers, const OmniKvOptions& options);

  private:
    std::vector<int32_t> pick_keys(const AttentionCall& call, int first, int end, int budget) override;

    std::vector<float> probabilities_;  ///< [n_q_heads][n_k], reused between calls
};

}  // namespace kascade
