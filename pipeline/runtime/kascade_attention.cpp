#include "pipeline/runtime/kascade_attention.h"

#include <algorithm>

#include "io/error.h"
#include "kernels/dense_attention.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"
#include "kernels/topk_tiles.h"

namespace kascade {

TileSelection select_layer_tiles(const TileMass& mass, const SparseAttentionOptions& options) {
    if (!options.pooled_heads) return select_topk_tiles(mass, options.topk);
    TileMass pooled;
    pooled.n_kv_heads = 1;
    pooled.n_q_tiles = mass.n_q_tiles;
    pooled.n_k_tiles = mass.n_k_tiles;
    pooled.tile = mass.tile;
    pooled.window = mass.window;
    pooled.mass.assign(static_cast<size_t>(mass.n_q_tiles) * mass.n_k_tiles, 0.0f);
    for (int h = 0; h < mass.n_kv_heads; ++h) {
        for (int qt = 0; qt < mass.n_q_tiles; ++qt) {
            const float* src = mass.row(h, qt);
            float* dst = pooled.row(0, qt);
            for (int kt = 0; kt < mass.n_k_tiles; ++kt) dst[kt] += src[kt];
        }
    }
    const TileSelection shared = select_topk_tiles(pooled, options.topk);
    // The one set copied to every KV head, so that readers need no special head map.
    TileSelection sel = shared;
    sel.n_kv_heads = mass.n_kv_heads;
    sel.count.resize(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles);
    sel.tiles.resize(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k);
    for (int h = 1; h < sel.n_kv_heads; ++h) {
        std::copy(shared.count.begin(), shared.count.end(), sel.count.begin() + static_cast<size_t>(h) * sel.n_q_tiles);
        std::copy(shared.tiles.begin(), shared.tiles.end(),
                  sel.tiles.begin() + static_cast<size_t>(h) * sel.n_q_tiles * sel.max_k);
    }
    return sel;
}

void anchor_select_and_attend(const AttnShape& shape, const float* q, const float* k, const float* v,
                              const SparseAttentionOptions& options, TileMass* mass, TileSelection* selection,
                              float* out) {
    attn_tile_mass(shape, options.tile, q, k, mass);
    *selection = select_layer_tiles(*mass, options);
    attn_sparse_prefill(shape, options.tile, q, k, v, *selection, nullptr, out);
}

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

void KascadeAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    KASCADE_CHECK(shape.n_q == shape.n_k,
                  "sparse attention policies run prefill from position 0 only (got {} queries against {} keys)",
                  shape.n_q, shape.n_k);
    const int l = call.layer;
    const LayerPlan& plan = schedule_.layers[l];
    const int tile = options_.tile;

    switch (plan.role) {
        case LayerRole::Dense:
            if (feeds_reuse_[l]) {
                attn_dense_prefill_with_mass(shape, tile, call.q, call.k, call.v, call.out, &mass_);
                selections_[l] = select_layer_tiles(mass_, options_);
            } else {
                attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
            }
            density_[l].add(dense_prefill_density(shape));
            break;
        case LayerRole::Anchor:
            anchor_select_and_attend(shape, call.q, call.k, call.v, options_, &mass_, &selections_[l], call.out);
            density_[l].add(sparse_prefill_density(shape, tile, selections_[l], nullptr));
            break;
        case LayerRole::Reuse: {
            const TileSelection& selection = selections_[plan.anchor];
            KASCADE_ASSERT(plan.anchor < l && selection.n_q_tiles == tile_count(shape.n_q, tile));
            attn_sparse_prefill(shape, tile, call.q, call.k, call.v, selection, plan.head_map.data(), call.out);
            density_[l].add(sparse_prefill_density(shape, tile, selection, plan.head_map.data()));
            break;
        }
    }
}

}  // namespace kascade
