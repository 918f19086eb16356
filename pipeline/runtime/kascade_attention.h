// pipeline/runtime/kascade_attention.h: the Kascade attention policy (and, with AttentionSchedule::oracle, the
// oracle top-k baseline), prefill only.
//
// Dense layers attend exactly; when a reuse layer depends on one it also pools its attention mass and keeps its
// top-k tiles. Anchor layers score every key (a cheap row log-sum-exp pass plus a pooling pass), keep their top-k
// key tiles per (KV head, query tile) and attend only to those plus the diagonal tile. Reuse layers attend to their
// anchor's tiles through the schedule's head map.
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

class KascadeAttention : public AttentionPolicy {
  public:
    KascadeAttention(AttentionSchedule schedule, SparseAttentionOptions options);

    void attend(const AttentionCall& call) override;
    std::string_view layer_role(int layer) const override;

    /// Keys attended per layer since construction (or the last reset_density()).
    const std::vector<LayerDensity>& layer_density() const { return density_; }
    void reset_density();

  private:
    void select_tiles(int layer, const TileMass& mass);

    AttentionSchedule schedule_;
    SparseAttentionOptions options_;
    std::vector<bool> feeds_reuse_;          ///< [layer] some reuse layer reads its selection
    std::vector<TileSelection> selections_;  ///< [layer] tiles kept in the current forward pass
    std::vector<LayerDensity> density_;
    std::vector<int32_t> pooled_head_map_;  ///< all zeros: every KV head reads the single pooled tile set
    std::vector<float> lse_;
    TileMass mass_;
};

}  // namespace kascade
