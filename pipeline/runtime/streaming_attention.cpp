#include "pipeline/runtime/streaming_attention.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/dense_attention.h"
#include "kernels/sparse_attention.h"
#include "kernels/topk_tiles.h"

namespace kascade {

TileSelection streaming_selection(int n_tokens, int tile, const TopKRule& rule, int window) {
    TileSelection s;
    s.n_kv_heads = 1;
    s.n_q_tiles = tile_count(n_tokens, tile);
    s.tile = tile;
    s.max_k = 0;
    for (int qt = 0; qt < s.n_q_tiles; ++qt)
        s.max_k = std::max(s.max_k, topk_tile_budget(rule, qt, tile, n_tokens, window));
    s.max_k = std::max(s.max_k, 1);
    s.count.assign(s.n_q_tiles, 0);
    s.tiles.assign(static_cast<size_t>(s.n_q_tiles) * s.max_k, 0);
    for (int qt = 0; qt < s.n_q_tiles; ++qt) {
        const int budget = topk_tile_budget(rule, qt, tile, n_tokens, window);
        int32_t* list = s.list(0, qt);
        int n = 0;
        if (first_window_tile(qt, tile, window) == 0) {
            if (budget > 0) list[n++] = 0;
            // The recent tiles qt-(budget-1) .. qt-1, skipping tile 0 which is already the sink.
            for (int kt = std::max(1, qt - (budget - 1)); kt < qt; ++kt) list[n++] = kt;
        } else {
            // The sink is outside the window: the recent tiles qt-budget .. qt-1 (all candidates, budget being
            // capped by their number).
            for (int kt = qt - budget; kt < qt; ++kt) list[n++] = kt;
        }
        s.count[qt] = n;
    }
    return s;
}

TokenSelection streaming_token_selection(int n_tokens, int tile, const TopKRule& rule, int window) {
    TokenSelection s;
    s.n_kv_heads = 1;
    s.n_q_tiles = tile_count(n_tokens, tile);
    s.tile = tile;
    s.max_k = 1;
    for (int qt = 0; qt < s.n_q_tiles; ++qt)
        s.max_k = std::max(s.max_k, topk_token_budget(rule, qt, tile, n_tokens, window));
    s.count.assign(s.n_q_tiles, 0);
    s.keys.assign(static_cast<size_t>(s.n_q_tiles) * s.max_k, 0);
    for (int qt = 0; qt < s.n_q_tiles; ++qt) {
        const int budget = topk_token_budget(rule, qt, tile, n_tokens, window);
        const int end = qt * tile;  // candidates end before the tile
        const int n_sink = first_window_key(qt, tile, window) == 0 ? std::min(tile, budget) : 0;
        int32_t* list = s.list(0, qt);
        int n = 0;
        for (int j = 0; j < n_sink; ++j) list[n++] = j;
        // The recent keys end - (budget - n_sink) .. end - 1 (all candidates when the budget covers them), after the
        // sinks.
        for (int j = std::max(n_sink, end - (budget - n_sink)); j < end; ++j) list[n++] = j;
        s.count[qt] = n;
    }
    return s;
}

TileSelection streaming_decode_selection(int n_k, int tile, const TopKRule& rule, int window) {
    TileSelection s;
    s.n_kv_heads = 1;
    s.n_q_tiles = 1;
    s.tile = tile;
    const int budget = decode_tile_budget(rule, tile, n_k, window);
    s.max_k = std::max(1, budget);
    s.tiles.assign(s.max_k, 0);
    const int q_tile = (n_k - 1) / tile;
    const int first = decode_first_key(n_k, window) / tile;
    int n = 0;
    if (first == 0) {
        if (budget > 0) s.tiles[n++] = 0;
        for (int kt = std::max(1, q_tile - (budget - 1)); kt < q_tile; ++kt) s.tiles[n++] = kt;
    } else {
        for (int kt = q_tile - budget; kt < q_tile; ++kt) s.tiles[n++] = kt;
    }
    s.count.assign(1, n);
    return s;
}

TokenSelection streaming_decode_token_selection(int n_k, int tile, const TopKRule& rule, int window) {
    TokenSelection s;
    s.n_kv_heads = 1;
    s.n_q_tiles = 1;
    s.tile = tile;
    const int budget = decode_token_budget(rule, tile, n_k, window);
    s.max_k = std::max(1, budget);
    s.keys.assign(s.max_k, 0);
    const int end = (n_k - 1) / tile * tile;  // candidates end before the query's tile
    const int n_sink = decode_first_key(n_k, window) == 0 ? std::min(tile, budget) : 0;
    int n = 0;
    for (int j = 0; j < n_sink; ++j) s.keys[n++] = j;
    for (int j = std::max(n_sink, end - (budget - n_sink)); j < end; ++j) s.keys[n++] = j;
    s.count.assign(1, n);
    return s;
}

StreamingAttention::StreamingAttention(int n_layers, SparseAttentionOptions options)
    : AttentionPolicy(n_layers), options_(options) {}

void StreamingAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    check_sparse_call(shape);
    const bool decode = shape.n_q == 1;
    if (call.layer == 0) {
        if (decode) {
            attn_dense_decode(shape, call.q, call.k, call.v, call.out);
            add_density(0, dense_decode_density(shape));
        } else {
            attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
            add_density(0, dense_prefill_density(shape));
        }
        return;
    }
    shared_head_map_.assign(shape.n_kv_heads, 0);
    if (decode) {
        if (decode_tokens_ != shape.n_k || decode_window_ != shape.effective_window()) {
            decode_selection_.granularity = options_.granularity;
            if (options_.granularity == KeyGranularity::Tile) {
                decode_selection_.tiles =
                    streaming_decode_selection(shape.n_k, options_.tile, options_.topk, shape.effective_window());
            } else {
                decode_selection_.tokens =
                    streaming_decode_token_selection(shape.n_k, options_.tile, options_.topk, shape.effective_window());
            }
            decode_tokens_ = shape.n_k;
            decode_window_ = shape.effective_window();
        }
        attend_selection(shape, call.q, call.k, call.v, options_.tile, decode_selection_, shared_head_map_.data(),
                         call.out);
        add_density(call.layer, selection_density(shape, options_.tile, decode_selection_, shared_head_map_.data()));
        return;
    }
    if (selection_tokens_ != shape.n_q || selection_window_ != shape.effective_window()) {
        selection_.granularity = options_.granularity;
        if (options_.granularity == KeyGranularity::Tile) {
            selection_.tiles = streaming_selection(shape.n_q, options_.tile, options_.topk, shape.effective_window());
        } else {
            selection_.tokens =
                streaming_token_selection(shape.n_q, options_.tile, options_.topk, shape.effective_window());
        }
        selection_tokens_ = shape.n_q;
        selection_window_ = shape.effective_window();
    }
    attend_selection(shape, call.q, call.k, call.v, options_.tile, selection_, shared_head_map_.data(), call.out);
    add_density(call.layer, selection_density(shape, options_.tile, selection_, shared_head_map_.data()));
}

}  // namespace kascade
