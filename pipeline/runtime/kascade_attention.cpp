#include "pipeline/runtime/kascade_attention.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/dense_attention.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

// The pooled-heads ablation for either granularity: the scores summed over KV heads (row_len entries per query tile),
// one selection made from them, and that selection copied to every KV head so readers need no special head map.
template <typename Mass, typename Selection, typename Select>
Selection select_pooled_heads(const Mass& mass, int row_len, Select select, std::vector<int32_t> Selection::*ids) {
    Mass pooled = mass;
    pooled.n_kv_heads = 1;
    pooled.mass.assign(static_cast<size_t>(mass.n_q_tiles) * row_len, 0.0f);
    for (int h = 0; h < mass.n_kv_heads; ++h) {
        for (int qt = 0; qt < mass.n_q_tiles; ++qt) {
            const float* src = mass.row(h, qt);
            float* dst = pooled.row(0, qt);
            for (int x = 0; x < row_len; ++x) dst[x] += src[x];
        }
    }
    const Selection shared = select(pooled);
    Selection sel = shared;
    sel.n_kv_heads = mass.n_kv_heads;
    sel.count.resize(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles);
    (sel.*ids).resize(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k);
    for (int h = 1; h < sel.n_kv_heads; ++h) {
        std::copy(shared.count.begin(), shared.count.end(), sel.count.begin() + static_cast<size_t>(h) * sel.n_q_tiles);
        std::copy((shared.*ids).begin(), (shared.*ids).end(),
                  (sel.*ids).begin() + static_cast<size_t>(h) * sel.n_q_tiles * sel.max_k);
    }
    return sel;
}

}  // namespace

TileSelection select_layer_tiles(const TileMass& mass, const SparseAttentionOptions& options) {
    const auto select = [&](const TileMass& m) { return select_topk_tiles(m, options.topk); };
    if (!options.pooled_heads) return select(mass);
    return select_pooled_heads<TileMass, TileSelection>(mass, mass.n_k_tiles, select, &TileSelection::tiles);
}

TokenSelection select_layer_tokens(const TokenMass& mass, const SparseAttentionOptions& options) {
    const auto select = [&](const TokenMass& m) { return select_topk_tokens(m, options.topk); };
    if (!options.pooled_heads) return select(mass);
    return select_pooled_heads<TokenMass, TokenSelection>(mass, mass.n_keys, select, &TokenSelection::keys);
}

void select_layer_keys(const AttnShape& shape, const float* q, KvPtr k, const SparseAttentionOptions& options,
                       PoolingScratch* scratch, LayerSelection* selection) {
    selection->granularity = options.granularity;
    const bool post = options.pooling == Pooling::PostSoftmax;
    if (options.granularity == KeyGranularity::Tile) {
        if (post) {
            attn_tile_mass(shape, options.tile, q, k, &scratch->tile_mass);
        } else {
            tile_max_score(shape, options.tile, q, k, &scratch->tile_mass);
        }
        selection->tiles = select_layer_tiles(scratch->tile_mass, options);
        selection->tokens = {};
    } else {
        if (post) {
            attn_token_mass(shape, options.tile, q, k, &scratch->token_mass);
        } else {
            token_max_score(shape, options.tile, q, k, &scratch->token_mass);
        }
        selection->tokens = select_layer_tokens(scratch->token_mass, options);
        selection->tiles = {};
    }
}

namespace {

// One granularity's decode top-k: select_into(mass, &selection) per KV head, or through select_pooled_heads.
template <typename Mass, typename Selection, typename SelectInto>
void select_decode(const Mass& mass, int row_len, bool pooled_heads, SelectInto select_into,
                   std::vector<int32_t> Selection::*ids, Selection* selection) {
    if (!pooled_heads) {
        select_into(mass, selection);
        return;
    }
    const auto select = [&](const Mass& m) {
        Selection s;
        select_into(m, &s);
        return s;
    };
    *selection = select_pooled_heads<Mass, Selection>(mass, row_len, select, ids);
}

// The decode top-k of the mass pooling left in scratch (decode_tile_mass at tile granularity, decode_token_mass at
// token granularity); pooled_heads as in prefill.
void select_from_decode_mass(const SparseAttentionOptions& options, PoolingScratch* scratch,
                             LayerSelection* selection) {
    selection->granularity = options.granularity;
    DecodeScoringScratch* decode = &scratch->decode;
    if (options.granularity == KeyGranularity::Tile) {
        select_decode(
            scratch->tile_mass, scratch->tile_mass.n_k_tiles, options.pooled_heads,
            [&](const TileMass& m, TileSelection* s) { select_decode_tiles(m, options.topk, decode, s); },
            &TileSelection::tiles, &selection->tiles);
    } else {
        select_decode(
            scratch->token_mass, scratch->token_mass.n_keys, options.pooled_heads,
            [&](const TokenMass& m, TokenSelection* s) { select_decode_tokens(m, options.topk, decode, s); },
            &TokenSelection::keys, &selection->tokens);
    }
}

}  // namespace

void select_decode_keys(const AttnShape& shape, const float* q, KvPtr k, const SparseAttentionOptions& options,
                        PoolingScratch* scratch, LayerSelection* selection) {
    if (options.granularity == KeyGranularity::Token && !options.pooled_heads) {
        // Each KV head's top-k inside the pass, right after its pooling.
        selection->granularity = KeyGranularity::Token;
        decode_token_mass(shape, options.tile, q, k, options.pooling, &scratch->decode, &scratch->token_mass,
                          &options.topk, &selection->tokens);
        return;
    }
    if (options.granularity == KeyGranularity::Tile) {
        decode_tile_mass(shape, options.tile, q, k, options.pooling, &scratch->decode, &scratch->tile_mass);
    } else {
        decode_token_mass(shape, options.tile, q, k, options.pooling, &scratch->decode, &scratch->token_mass);
    }
    select_from_decode_mass(options, scratch, selection);
}

void attend_selection(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, int tile,
                      const LayerSelection& selection, const int32_t* head_map, float* out) {
    if (shape.n_q == 1) {
        if (selection.granularity == KeyGranularity::Tile) {
            const TileSelection& s = selection.tiles;
            attn_sparse_decode(shape, tile, q, k, v, s.tiles.data(), s.count.data(), s.max_k, head_map, out);
        } else {
            const TokenSelection& s = selection.tokens;
            attn_token_sparse_decode(shape, tile, q, k, v, s.keys.data(), s.count.data(), s.max_k, head_map, out);
        }
        return;
    }
    if (selection.granularity == KeyGranularity::Tile) {
        attn_sparse_prefill(shape, tile, q, k, v, selection.tiles, head_map, out);
    } else {
        attn_token_sparse_prefill(shape, tile, q, k, v, selection.tokens, head_map, out);
    }
}

LayerDensity selection_density(const AttnShape& shape, int tile, const LayerSelection& selection,
                               const int32_t* head_map) {
    if (shape.n_q == 1) {
        if (selection.granularity == KeyGranularity::Tile)
            return sparse_decode_density(shape, tile, selection.tiles, head_map);
        return token_sparse_decode_density(shape, tile, selection.tokens, head_map);
    }
    if (selection.granularity == KeyGranularity::Tile)
        return sparse_prefill_density(shape, tile, selection.tiles, head_map);
    return token_sparse_prefill_density(shape, tile, selection.tokens, head_map);
}

void anchor_select_and_attend(const AttnShape& shape, const float* q, KvPtr k, KvPtr v,
                              const SparseAttentionOptions& options, PoolingScratch* scratch, LayerSelection* selection,
                              float* out) {
    if (shape.n_q > 1) {
        select_layer_keys(shape, q, k, options, scratch, selection);
        attend_selection(shape, q, k, v, options.tile, *selection, nullptr, out);
        return;
    }
    select_decode_keys(shape, q, k, options, scratch, selection);
    // The scores the selection was pooled from stand in for the selected K rows: the anchor reads only their V rows,
    // as the byte bound counts it.
    if (selection->granularity == KeyGranularity::Tile) {
        attn_sparse_decode_scored(shape, options.tile, scratch->decode, v, selection->tiles, out);
    } else {
        attn_token_sparse_decode_scored(shape, options.tile, scratch->decode, v, selection->tokens, out);
    }
}

KascadeAttention::KascadeAttention(AttentionSchedule schedule, SparseAttentionOptions options)
    : AttentionPolicy(static_cast<int>(schedule.layers.size())), schedule_(std::move(schedule)), options_(options) {
    const int n_layers = static_cast<int>(schedule_.layers.size());
    feeds_reuse_.resize(n_layers);
    for (int l = 0; l < n_layers; ++l) feeds_reuse_[l] = schedule_.is_anchor_for_reuse(l);
    selections_.resize(n_layers);
}

RunLayerRole KascadeAttention::layer_role(int layer) const {
    return run_layer_role(schedule_.layers[layer].role);
}

void check_sparse_call(const AttnShape& shape) {
    KASCADE_CHECK(shape.n_q == shape.n_k || shape.n_q == 1,
                  "sparse attention policies run a prefill from position 0 or one decode query at a time (got {} "
                  "queries against {} cached keys)",
                  shape.n_q, shape.n_k);
}

void KascadeAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    check_sparse_call(shape);
    const int l = call.layer;
    const LayerPlan& plan = schedule_.layers[l];
    const int tile = options_.tile;
    if (shape.n_q == 1) {
        attend_decode(call, plan);
        return;
    }

    switch (plan.role) {
        case LayerRole::Dense:
            if (feeds_reuse_[l] && options_.granularity == KeyGranularity::Tile &&
                options_.pooling == Pooling::PostSoftmax) {
                // The dense output and the tile mass in one pass.
                attn_dense_prefill_with_mass(shape, tile, call.q, call.k, call.v, call.out, &scratch_.tile_mass);
                selections_[l].granularity = KeyGranularity::Tile;
                selections_[l].tiles = select_layer_tiles(scratch_.tile_mass, options_);
            } else {
                attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
                if (feeds_reuse_[l]) select_layer_keys(shape, call.q, call.k, options_, &scratch_, &selections_[l]);
            }
            add_density(l, dense_prefill_density(shape));
            break;
        case LayerRole::Anchor:
            anchor_select_and_attend(shape, call.q, call.k, call.v, options_, &scratch_, &selections_[l], call.out);
            add_density(l, selection_density(shape, tile, selections_[l], nullptr));
            break;
        case LayerRole::Reuse: {
            const LayerSelection& selection = selections_[plan.anchor];
            KASCADE_ASSERT(plan.anchor < l && selection.granularity == options_.granularity);
            attend_selection(shape, call.q, call.k, call.v, tile, selection, plan.head_map.data(), call.out);
            add_density(l, selection_density(shape, tile, selection, plan.head_map.data()));
            break;
        }
    }
}

void KascadeAttention::attend_decode(const AttentionCall& call, const LayerPlan& plan) {
    const AttnShape& shape = call.shape;
    const int l = call.layer;
    const int tile = options_.tile;
    switch (plan.role) {
        case LayerRole::Dense:
            if (feeds_reuse_[l] && options_.pooling == Pooling::PostSoftmax) {
                // The dense output and the mass from one pass over K and V, and where the selection is made per KV
                // head, each head's top-k right after its pooling.
                if (options_.granularity == KeyGranularity::Tile) {
                    attn_dense_decode_with_tile_mass(shape, tile, call.q, call.k, call.v, call.out, &scratch_.decode,
                                                     &scratch_.tile_mass);
                    select_from_decode_mass(options_, &scratch_, &selections_[l]);
                } else if (!options_.pooled_heads) {
                    selections_[l].granularity = KeyGranularity::Token;
                    attn_dense_decode_with_token_mass(shape, tile, call.q, call.k, call.v, call.out, &scratch_.decode,
                                                      &scratch_.token_mass, &options_.topk, &selections_[l].tokens);
                } else {
                    attn_dense_decode_with_token_mass(shape, tile, call.q, call.k, call.v, call.out, &scratch_.decode,
                                                      &scratch_.token_mass);
                    select_from_decode_mass(options_, &scratch_, &selections_[l]);
                }
            } else {
                attn_dense_decode(shape, call.q, call.k, call.v, call.out);
                if (feeds_reuse_[l]) select_decode_keys(shape, call.q, call.k, options_, &scratch_, &selections_[l]);
            }
            add_density(l, dense_decode_density(shape));
            break;
        case LayerRole::Anchor:
            anchor_select_and_attend(shape, call.q, call.k, call.v, options_, &scratch_, &selections_[l], call.out);
            add_density(l, selection_density(shape, tile, selections_[l], nullptr));
            break;
        case LayerRole::Reuse: {
            const LayerSelection& selection = selections_[plan.anchor];
            KASCADE_ASSERT(plan.anchor < l && selection.granularity == options_.granularity);
            attend_selection(shape, call.q, call.k, call.v, tile, selection, plan.head_map.data(), call.out);
            add_density(l, selection_density(shape, tile, selection, plan.head_map.data()));
            break;
        }
    }
}

}  // namespace kascade
