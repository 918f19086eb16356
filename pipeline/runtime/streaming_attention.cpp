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

StreamingAttention::StreamingAttention(int n_layers, SparseAttentionOptions options)
    : options_(options), density_(n_layers) {}

void StreamingAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    KASCADE_CHECK(shape.n_q == shape.n_k,
                  "sparse attention policies run prefill from position 0 only (got {} queries against {} keys)",
                  shape.n_q, shape.n_k);
    if (call.layer == 0) {
        attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
        density_[0].add(dense_prefill_density(shape));
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
    shared_head_map_.assign(shape.n_kv_heads, 0);
    attend_selection(shape, call.q, call.k, call.v, options_.tile, selection_, shared_head_map_.data(), call.out);
    density_[call.layer].add(selection_density(shape, options_.tile, selection_, shared_head_map_.data()));
}

}  // namespace kascade
