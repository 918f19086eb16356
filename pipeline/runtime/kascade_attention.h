// pipeline/runtime/kascade_attention.h: the Kascade attention policy (and, with AttentionSchedule::oracle, the
// oracle top-k baseline), for prefill from position 0 and for decode (one new query against the whole cache).
//
// Dense layers attend exactly; when a reuse layer depends on one it also pools its attention and keeps its top-k.
// Anchor layers score every key, pool per (KV head, query tile, key or key tile), keep their top-k and attend only to
// those plus the diagonal tile. Reuse layers attend to their anchor's keys through the schedule's head map. Selections
// are individual keys (KeyGranularity::Token, the paper's) or whole key tiles (KeyGranularity::Tile). With a sliding
// window (AttnShape::window) every layer selects and attends only inside its own window; a reuse layer whose window
// differs from its anchor's attends the anchor's keys only where they fall inside its own window, and its density
// counts exactly those keys.
//
// Decode (AttentionCall with shape.n_q == 1): the same roles, re-selected at every step. Anchors (and dense layers that
// feed reuse layers) score every cached key for the new token (decode_token_mass / decode_tile_mass), keep the decode
// top-k (kernels/decode_scoring.h: the budget of the last row of a prefill of n_k tokens) and attend to those plus the
// query's own tile; reuse layers attend to their anchor's keys of the same step through the head map.
#pragma once

#include <vector>

#include "kernels/decode_scoring.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/attention_schedule.h"

namespace kascade {

struct SparseAttentionOptions {
    int tile = 16;                                       ///< tokens per query tile (and key tile)
    TopKRule topk;                                       ///< how many keys an anchor keeps
    KeyGranularity granularity = KeyGranularity::Token;  ///< individual keys (the paper) or whole key tiles
    Pooling pooling = Pooling::PostSoftmax;              ///< what ranks the keys
    bool pooled_heads = false;  ///< ablation: one selection per query tile shared by all KV heads (scores summed)
};

/// One layer's selection, at the granularity of the options that made it (the other member is not used). A decode
/// step's selection has one query tile (n_q_tiles == 1).
struct LayerSelection {
    KeyGranularity granularity = KeyGranularity::Token;
    TileSelection tiles;
    TokenSelection tokens;
};

/// Scratch of the pooling step, reused across calls.
struct PoolingScratch {
    TileMass tile_mass;
    TokenMass token_mass;
    DecodeScoringScratch decode;
};

/// The top-k key tiles of a layer from its pooled scores (select_topk_tiles with options.topk, inside mass.window).
/// With options.pooled_heads the scores are summed over KV heads first and the one set is given to every KV head.
TileSelection select_layer_tiles(const TileMass& mass, const SparseAttentionOptions& options);
/// The same at token granularity (select_topk_tokens).
TokenSelection select_layer_tokens(const TokenMass& mass, const SparseAttentionOptions& options);

/// Pools a layer's attention as options say (granularity, pooling) in scores-only passes and keeps its top-k.
void select_layer_keys(const AttnShape& shape, const float* q, KvPtr k, const SparseAttentionOptions& options,
                       PoolingScratch* scratch, LayerSelection* selection);

/// Decode (shape.n_q == 1): pools the new token's attention as options say and keeps the decode top-k
/// (decode_token_mass / decode_tile_mass, select_decode_tokens / select_decode_tiles; pooled_heads as in prefill).
void select_decode_keys(const AttnShape& shape, const float* q, KvPtr k, const SparseAttentionOptions& options,
                        PoolingScratch* scratch, LayerSelection* selection);

/// Exact attention over a selection plus the diagonal tile (attn_sparse_prefill or attn_token_sparse_prefill; for a
/// decode shape, n_q == 1, attn_sparse_decode or attn_token_sparse_decode with the query's own tile).
/// head_map as in attn_sparse_prefill (null = identity).
void attend_selection(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, int tile,
                      const LayerSelection& selection, const int32_t* head_map, float* out);

/// Keys attended under a selection (sparse_prefill_density or token_sparse_prefill_density; their decode twins for
/// n_q == 1).
LayerDensity selection_density(const AttnShape& shape, int tile, const LayerSelection& selection,
                               const int32_t* head_map);

/// One anchor layer's call. Prefill (shape.n_q == shape.n_k): select_layer_keys, then attend_selection. Decode
/// (n_q == 1): select_decode_keys, then attn_token_sparse_decode_scored or attn_sparse_decode_scored (the selected
/// keys' scores from the scoring pass, their V rows only). KascadeAttention runs this for every anchor layer and
/// bench_attention times it, so the benchmark measures what an evaluation runs. out: [n_q][n_q_heads][head_dim].
void anchor_select_and_attend(const AttnShape& shape, const float* q, KvPtr k, KvPtr v,
                              const SparseAttentionOptions& options, PoolingScratch* scratch, LayerSelection* selection,
                              float* out);

/// KASCADE_CHECK that `shape` is a call a sparse policy runs: a prefill from position 0 (n_q == n_k) or one decode
/// query (n_q == 1).
void check_sparse_call(const AttnShape& shape);

class KascadeAttention : public AttentionPolicy {
  public:
    KascadeAttention(AttentionSchedule schedule, SparseAttentionOptions options);

    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int layer) const override;

    /// The keys `layer` kept in the last call (anchors, and dense layers that feed reuse layers; empty otherwise).
    const LayerSelection& selection(int layer) const { return selections_[layer]; }

  private:
    void attend_decode(const AttentionCall& call, const LayerPlan& plan);

    AttentionSchedule schedule_;
    SparseAttentionOptions options_;
    std::vector<bool> feeds_reuse_;           ///< [layer] some reuse layer reads its selection
    std::vector<LayerSelection> selections_;  ///< [layer] keys kept in the current forward pass
    PoolingScratch scratch_;
};

}  // namespace kascade
