// pipeline/runtime/kascade_attention.h: the Kascade attention policy (and, with AttentionSchedule::oracle, the
// oracle top-k baseline), prefill only.
//
// Dense layers attend exactly; when a reuse layer depends on one it also pools its attention mass and keeps its
// top-k tiles. Anchor layers score every key (one scores-only pass pooling the post-softmax mass), keep their top-k
// key tiles per (KV head, query tile) and attend only to those plus the diagonal tile. Reuse layers attend to their
// anchor's tiles through the schedule's head map. With a sliding window (AttnShape::window) every layer selects and
// attends only inside its own window; a reuse layer whose window differs from its anchor's attends the anchor's
// tiles only where they fall inside its own window, and its density counts exactly those keys.
#pragma once

#include <vector>

#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/attention_schedule.h"

namespace kascade {

struct SparseAttentionOptions {
    int tile = 16;              ///< tokens per query and key tile
    TopKRule topk;              ///< how many key tiles an anchor keeps
    bool pooled_heads = false;  ///< ablation: one tile set per query tile shared by all KV heads (mass summed)
};

/// The top-k key tiles of a layer from its pooled mass (select_topk_tiles with options.topk, inside mass.window). With
/// options.pooled_heads the mass is summed over KV heads first and the one tile set is given to every KV head.
TileSelection select_layer_tiles(const TileMass& mass, const SparseAttentionOptions& options);

/// One anchor layer's prefill (shape.n_q == shape.n_k): the post-softmax tile mass in one scores-only pass
/// (attn_tile_mass), its top-k key tiles (select_layer_tiles), then exact attention over those tiles plus the
/// diagonal (attn_sparse_prefill). KascadeAttention runs this for every anchor layer and bench_attention times it,
/// so the benchmark measures what an evaluation runs. mass: scratch (reused across calls); selection: the tiles kept;
/// out: [n_q][n_q_heads][head_dim].
void anchor_select_and_attend(const AttnShape& shape, const float* q, const float* k, const float* v,
                              const SparseAttentionOptions& options, TileMass* mass, TileSelection* selection,
                              float* out);

class KascadeAttention : public AttentionPolicy {
  public:
    KascadeAttention(AttentionSchedule schedule, SparseAttentionOptions options);

    void attend(const AttentionCall& call) override;
    std::string_view layer_role(int layer) const override;

    /// Keys attended per layer since construction (or the last reset_density()).
    const std::vector<LayerDensity>& layer_density() const { return density_; }
    void reset_density();

  private:
    AttentionSchedule schedule_;
    SparseAttentionOptions options_;
    std::vector<bool> feeds_reuse_;          ///< [layer] some reuse layer reads its selection
    std::vector<TileSelection> selections_;  ///< [layer] tiles kept in the current forward pass
    std::vector<LayerDensity> density_;
    TileMass mass_;
};

}  // namespace kascade
