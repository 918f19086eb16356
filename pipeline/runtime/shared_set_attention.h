// pipeline/runtime/shared_set_attention.h: the decode policy that the OmniKV and LessIsMore baselines share.
//
// At each decode step a *selecting layer* attends densely and then picks one set of keys for all heads (a
// SharedKeySet), within Kascade's decode budget in keys (kernels/decode_scoring.h: decode_token_budget, chosen among
// the keys before the query's tile, inside its window), so the baselines are compared at the same density as the
// other methods. The layers that read a set attend only it (plus the query's own tile, as every method here) in every
// head; the other layers attend densely. A prefill runs dense attention in every layer: both methods select only for
// generated tokens. A subclass says which layers select and which read (the constructor's `source`) and how a
// selecting layer picks its keys (pick_keys).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/shared_key_set.h"

namespace kascade {

class SharedSetAttention : public AttentionPolicy {
  public:
    void attend(const AttentionCall& call) final;
    /// "dense", the selecting layers' role (OmniKV's "filter", LessIsMore's "selection"), or "reuse".
    RunLayerRole layer_role(int layer) const final;

    /// The keys the selecting layer `layer` picked in the last decode call (one KV head, ascending).
    const TokenSelection& selection(int layer) const { return sets_[layer].selection(); }

  protected:
    /// source[l]: l for a selecting layer, the selecting layer whose set layer l reads, or -1 where l attends
    /// densely. selecting_role names the selecting layers in layer_role; tile (the query's own tile, always attended)
    /// and topk set the budget.
    SharedSetAttention(std::vector<int> source, RunLayerRole selecting_role, int tile, TopKRule topk);

    /// The keys a selecting layer keeps among the candidates [first, end) (the keys before the query's tile inside
    /// its window) for a budget of `budget` keys, picked after the layer's dense attention (any order, no repeats).
    virtual std::vector<int32_t> pick_keys(const AttentionCall& call, int first, int end, int budget) = 0;

  private:
    std::vector<int> source_;
    RunLayerRole selecting_role_;
    int tile_;
    TopKRule topk_;
    std::vector<SharedKeySet> sets_;
};

}  // namespace kascade
