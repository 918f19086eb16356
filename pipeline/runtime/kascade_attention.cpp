#include "pipeline/runtime/kascade_attention.h"

#include "io/error.h"
#include "kernels/dense_attention.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"
#include "kernels/topk_tiles.h"

namespace kascade {

KascadeAttention::KascadeAttention(AttentionSchedule schedule, SparseAttentionOptions options)
    : schedule_(std::move(schedule)), options_(options) {
    const int n_layers = static_cast<int>(schedule_.layers.size());
    feeds_reuse_.resize(n_layers);
    for (int l = 0; l < n_layers; ++l) feeds_reuse_[l] = schedule_.is_anchor_for_reuse(l);
    selections_.resize(n_layers);
    density_.resize(n_layers);
}

std::string_view KascadeAttention::layer_role(int layer) const {
    return layer_role_name(schedule_.layers[layer].role);
}

void KascadeAttention::reset_density() {
    density_.assign(density_.size(), LayerDensity{});
}

void KascadeAttention::select_tiles(int layer, const TileMass& mass) {
    if (!options_.pooled_heads) {
        selections_[layer] = select_topk_tiles(mass, options_.topk);
        return;
    }
    TileMass pooled;
    pooled.n_kv_heads = 1;
    pooled.n_q_tiles = mass.n_q_tiles;
    pooled.n_k_tiles = mass.n_k_tiles;
    pooled.tile = mass.tile;
    pooled.mass.assign(static_cast<size_t>(mass.n_q_tiles) * mass.n_k_tiles, 0.0f);
    for (int h = 0; h < mass.n_kv_heads; ++h) {
        for (int qt = 0; qt < mass.n_q_tiles; ++qt) {
            const float* src = mass.row(h, qt);
            float* dst = pooled.row(0, qt);
            for (int kt = 0; kt < mass.n_k_tiles; ++kt) dst[kt] += src[kt];
        }
    }
    selections_[layer] = select_topk_tiles(pooled, options_.topk);
}

void KascadeAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    KASCADE_CHECK(shape.n_q == shape.n_k,
                  "sparse attention policies run prefill from position 0 only (got {} queries against {} keys)",
                  shape.n_q, shape.n_k);
    const int l = call.layer;
    const LayerPlan& plan = schedule_.layers[l];
    const int tile = options_.tile;
    if (options_.pooled_heads) pooled_head_map_.assign(shape.n_kv_heads, 0);
    const int32_t* own_map = options_.pooled_heads ? pooled_head_map_.data() : nullptr;

    switch (plan.role) {
        case LayerRole::Dense:
            if (feeds_reuse_[l]) {
                attn_dense_prefill_with_mass(shape, tile, call.q, call.k, call.v, call.out, &mass_);
                select_tiles(l, mass_);
            } else {
                attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
            }
            density_[l].add(dense_prefill_density(shape));
            break;
        case LayerRole::Anchor:
            lse_.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_q);
            attn_row_lse(shape, call.q, call.k, lse_.data());
            tile_mass_post_softmax(shape, tile, call.q, call.k, lse_.data(), &mass_);
            select_tiles(l, mass_);
            attn_sparse_prefill(shape, tile, call.q, call.k, call.v, selections_[l], own_map, call.out);
            density_[l].add(sparse_prefill_density(shape, tile, selections_[l], own_map));
            break;
        case LayerRole::Reuse: {
            const TileSelection& selection = selections_[plan.anchor];
            KASCADE_ASSERT(plan.anchor < l && selection.n_q_tiles == tile_count(shape.n_q, tile));
            const int32_t* map = options_.pooled_heads ? own_map : plan.head_map.data();
            attn_sparse_prefill(shape, tile, call.q, call.k, call.v, selection, map, call.out);
            density_[l].add(sparse_prefill_density(shape, tile, selection, map));
            break;
        }
    }
}

}  // namespace kascade
