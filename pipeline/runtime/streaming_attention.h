// pipeline/runtime/streaming_attention.h: the StreamingLLM baseline (attention sinks + a recent window), with the
// same key budget per query tile as Kascade's top-k so the two are compared at equal density. Layer 0 stays dense,
// as it does for every method here. Decode calls (one new query) use the decode budget of kernels/decode_scoring.h.
#pragma once

#include <vector>

#include "kernels/decode_scoring.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/kascade_attention.h"

namespace kascade {

/// The streaming tile set of every query tile: key tile 0 (the sink) and the most recent budget-1 tiles before the
/// diagonal, where budget = topk_tile_budget(rule, q_tile, tile, window). With a window (AttnShape::
/// effective_window(), 0 = none) only candidate tiles inside it are chosen: when tile 0 is outside the window of every
/// query of the tile there is no sink and the whole budget goes to the most recent tiles. One set shared by all KV
/// heads.
TileSelection streaming_selection(int n_tokens, int tile, const TopKRule& rule, int window = 0);

/// The token-level streaming set of every query tile (KeyGranularity::Token): the first min(tile, budget) keys (the
/// sinks) and the most recent keys before the tile, budget = topk_token_budget(rule, q_tile, tile, n_tokens, window)
/// keys in all. When key 0 is outside the window of every query of the tile the whole budget goes to the most recent
/// keys. One set shared by all KV heads.
TokenSelection streaming_token_selection(int n_tokens, int tile, const TopKRule& rule, int window = 0);

/// Decode: the streaming tile set of the query at position n_k - 1 (a decode selection: one query tile, one KV head):
/// key tile 0 (the sink) when it is a decode candidate, and the most recent candidate tiles before the query's tile,
/// decode_tile_budget() tiles in all.
TileSelection streaming_decode_selection(int n_k, int tile, const TopKRule& rule, int window = 0);

/// Decode at token granularity: the first min(tile, budget) keys (the sinks) when key 0 is inside the query's window,
/// and the most recent keys before the query's tile, budget = decode_token_budget() keys in all.
TokenSelection streaming_decode_token_selection(int n_k, int tile, const TopKRule& rule, int window = 0);

class StreamingAttention : public AttentionPolicy {
  public:
    StreamingAttention(int n_layers, SparseAttentionOptions options);

    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int layer) const override {
        return layer == 0 ? RunLayerRole::Dense : RunLayerRole::Streaming;
    }

  private:
    SparseAttentionOptions options_;
    LayerSelection selection_;  ///< for the last sequence length and window seen
    int selection_tokens_ = -1;
    int selection_window_ = -1;
    std::vector<int32_t> shared_head_map_;
    LayerSelection decode_selection_;  ///< for the last decode call's cache length and window
    int decode_tokens_ = -1;
    int decode_window_ = -1;
};

}  // namespace kascade
