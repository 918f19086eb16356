// pipeline/runtime/lessismore_attention.h: the LessIsMore baseline (Yang et al., 2025), a decode-time method, as the
// Kascade paper's code runs it (microsoft/kascade, src/strategies/LessIsMoreStrategy.py).
//
// At each decode step a *selection layer* attends densely and picks one set of keys for all heads from a budget of B
// keys: the first sink_tokens keys (the attention sinks), the most recent keys, and in between the union of every
// query head's own top keys. The budget is split as the reference splits it: floor(B * (1 - window_ratio)) keys by
// score, the rest the sinks and the recent window (no sinks when that rest is smaller than sink_tokens). Each query
// head ranks the keys between the sinks and the window by its scaled raw score; the union is taken rank by rank (every
// head's best, then every head's second, ..., heads in order), repeats skipped, until it holds the score share. The
// layers after a selection layer, up to the next one, attend only that set (plus the query's own tile, as every
// method here) in every head; the layers before the first selection layer attend densely.
//
// B is Kascade's decode budget in keys (kernels/decode_scoring.h: decode_token_budget, chosen among the keys before
// the query's tile, inside its window), so LessIsMore is compared at the same density as the other methods; when B
// covers every such key the set is all of them (the reference's dense case). A prefill runs dense attention in every
// layer: LessIsMore selects only for generated tokens.
#pragma once

#include <string_view>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/shared_key_set.h"

namespace kascade {

struct LessIsMoreOptions {
    int tile = 16;                      ///< the query's own tile is always attended; the budget is chosen before it
    TopKRule topk;                      ///< budget B in keys (decode_token_budget)
    std::vector<int> selection_layers;  ///< ascending (the reference's recompute_layers_l)
    double window_ratio = 0.25;  ///< share of B for the sinks and the recent window (the reference's lim_ratio_factor)
    int sink_tokens = 4;         ///< the reference's num_sink_tokens
};

/// KASCADE_CHECK that `selection_layers` suit a model of n_layers (not empty, ascending, each in [0, n_layers)) and
/// window_ratio is in [0, 1]. `layers_option` and `ratio_option` name them in the messages.
void check_lessismore_options(const std::vector<int>& selection_layers, double window_ratio, int n_layers,
                              std::string_view layers_option, std::string_view ratio_option);

/// How a selection layer splits a budget of `budget` keys: sinks, keys by score, recent keys (sum: budget).
struct LessIsMoreSplit {
    int sinks = 0;
    int by_score = 0;
    int recent = 0;
};
LessIsMoreSplit lessismore_split(int budget, double window_ratio, int sink_tokens);

/// The keys a selection layer keeps among the candidates [first, end) (keys before the query's tile inside its
/// window) for a budget of `budget` keys (<= end - first): all of them when the budget covers them, else the sinks at
/// the start, the recent keys at the end, and the rank-by-rank union of each head's top keys in between.
/// scores: [n_heads][row_stride] raw scores (decode_head_scores). Returned ascending.
std::vector<int32_t> lessismore_selection(const float* scores, int n_heads, int row_stride, int first, int end,
                                          int budget, double window_ratio, int sink_tokens);

class LessIsMoreAttention : public AttentionPolicy {
  public:
    LessIsMoreAttention(int n_layers, LessIsMoreOptions options);

    void attend(const AttentionCall& call) override;
    /// "dense", "selection" (attends densely, picks the set) or "reuse" (attends the last selection layer's set).
    RunLayerRole layer_role(int layer) const override;

    /// Keys attended per layer since construction (or the last reset_density()).
    const std::vector<LayerDensity>& layer_density() const { return density_; }
    void reset_density();

    /// The keys the selection layer `layer` picked in the last decode call (one KV head, ascending).
    const TokenSelection& selection(int layer) const { return sets_[layer].selection(); }

  private:
    enum class Role { Dense, Selection, Reuse };

    LessIsMoreOptions options_;
    std::vector<Role> roles_;
    std::vector<int> source_;  ///< [layer] the selection layer a reuse layer reads
    std::vector<SharedKeySet> sets_;
    std::vector<LayerDensity> density_;
    std::vector<float> scores_;
};

}  // namespace kascade
