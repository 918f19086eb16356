// pipeline/runtime/lessismore_attention.h: the LessIsMore baseline (Yang et al., 2025), a decode-time method, as the
// Kascade paper's code runs it (microsoft/kascade, src/strategies/LessIsMoreStrategy.py).
//
// At each decode step a *selection layer* attends densely and picks one set of keys for all heads from a budget of B
// keys: the first sink_tokens keys (the attention sinks), the most recent keys, and in between the union of every
// query head's own top keys. The budget is split as the reference splits it: floor(B * (1 - window_ratio)) keys by
// score, the rest the sinks and the recent window (no sinks when that rest is smaller than sink_tokens). Each query
// head ranks the keys between the sinks and the window by its scaled raw score; the union is taken rank by rank (every
// head's best, then every head's second, ..., heads in order), repeats skipped, until it holds the score share. The
// layers after a selection layer, up to the next one, attend only that set in every head
// (pipeline/runtime/shared_set_attention.h, with the budget B and the prefill); the layers before the first selection
// layer attend densely. When B covers every candidate key the set is all of them (the reference's dense case).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/shared_set_attention.h"

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

/// The selecting layers are the selection layers (layer_role "selection"); every layer after one reads its set, up to
/// the next.
class LessIsMoreAttention : public SharedSetAttention {
  public:
    LessIsMoreAttention(int n_layers, const LessIsMoreOptions& options);

  private:
    std::vector<int32_t> pick_keys(const AttentionCall& call, int first, int end, int budget) override;

    double window_ratio_;  ///< the options' split of the budget (the base keeps tile and topk)
    int sink_tokens_;
    std::vector<float> scores_;  ///< [n_q_heads][n_k], reused between calls
};

}  // namespace kascade
