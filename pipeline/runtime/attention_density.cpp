#include "pipeline/runtime/attention_density.h"

#include <algorithm>

namespace kascade {
namespace {

/// First key inside the window of the query at position p (0 without a window).
int window_start(int p, int window) {
    return window > 0 ? std::max(0, p - window + 1) : 0;
}

}  // namespace

LayerDensity dense_prefill_density(const AttnShape& shape) {
    const double n = shape.n_q;
    const double w = shape.effective_window();
    // Rows 0..w-1 see p + 1 keys, the n - w rows after them exactly w.
    const double per_head = w > 0 ? w * (w + 1) / 2 + (n - w) * w : n * (n + 1) / 2;
    return {per_head * shape.n_q_heads, per_head * shape.n_q_heads};
}

LayerDensity sparse_prefill_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                    const int32_t* head_map) {
    LayerDensity d = dense_prefill_density(shape);
    d.attended_keys = 0;
    const int n = shape.n_q;
    const int n_tiles = tile_count(n, tile);
    const int group = shape.group_size();
    const int window = shape.effective_window();
    // Keys [begin, end) that the query at position p attends.
    const auto seen = [&](int p, int begin, int end) {
        return static_cast<double>(std::max(0, end - std::max(begin, window_start(p, window))));
    };
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int source = head_map != nullptr ? head_map[h] : h;
        for (int qt = 0; qt < n_tiles; ++qt) {
            const int p0 = qt * tile;
            const int rows = std::min(tile, n - p0);
            // The last row's window starts latest: a tile starting at or after it is wholly seen by every row.
            const int last_start = window_start(p0 + rows - 1, window);
            double keys = 0;
            const int32_t* list = selection.list(source, qt);
            for (int i = 0; i < selection.size(source, qt); ++i) {
                const int kt = list[i];
                if (kt * tile >= last_start) {
                    keys += static_cast<double>(rows) * tile;
                } else {
                    for (int p = p0; p < p0 + rows; ++p) keys += seen(p, kt * tile, (kt + 1) * tile);
                }
            }
            // The diagonal tile: row r (0-based) sees r + 1 keys of it, fewer if its window starts inside the tile.
            if (p0 >= last_start) {
                keys += static_cast<double>(rows) * (rows + 1) / 2;
            } else {
                for (int p = p0; p < p0 + rows; ++p) keys += seen(p, p0, p + 1);
            }
            d.attended_keys += group * keys;
        }
    }
    return d;
}

LayerDensity token_sparse_prefill_density(const AttnShape& shape, int tile, const TokenSelection& selection,
                                          const int32_t* head_map) {
    LayerDensity d = dense_prefill_density(shape);
    d.attended_keys = 0;
    const int n = shape.n_q;
    const int window = shape.effective_window();
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int source = head_map != nullptr ? head_map[h] : h;
        for (int qt = 0; qt < tile_count(n, tile); ++qt) {
            const int32_t* list = selection.list(source, qt);
            const int32_t* end = list + selection.size(source, qt);
            const int p0 = qt * tile;
            double keys = 0;
            for (int p = p0; p < std::min(n, p0 + tile); ++p) {
                const int begin = window_start(p, window);
                // Selected keys are ascending and before the tile: those from the window's start on are seen.
                keys += static_cast<double>(end - std::lower_bound(list, end, begin));
                keys += p + 1 - std::max(p0, begin);  // the diagonal tile, causally
            }
            d.attended_keys += shape.group_size() * keys;
        }
    }
    return d;
}

LayerDensity dense_decode_density(const AttnShape& shape) {
    const double keys = shape.n_k - window_start(shape.n_k - 1, shape.effective_window());
    return {keys * shape.n_q_heads, keys * shape.n_q_heads};
}

namespace {

/// Keys of the decode query's own tile inside its window.
int own_tile_keys(const AttnShape& shape, int tile) {
    const int p = shape.n_k - 1;
    return shape.n_k - std::max(p / tile * tile, window_start(p, shape.effective_window()));
}

}  // namespace

LayerDensity sparse_decode_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                   const int32_t* head_map) {
    LayerDensity d = dense_decode_density(shape);
    d.attended_keys = 0;
    const int begin = window_start(shape.n_k - 1, shape.effective_window());
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int source = head_map != nullptr ? head_map[h] : h;
        const int32_t* list = selection.list(source, 0);
        double keys = own_tile_keys(shape, tile);
        for (int i = 0; i < selection.size(source, 0); ++i)
            keys += std::max(0, (list[i] + 1) * tile - std::max(list[i] * tile, begin));
        d.attended_keys += shape.group_size() * keys;
    }
    return d;
}

LayerDensity token_sparse_decode_density(const AttnShape& shape, int tile, const TokenSelection& selection,
                                         const int32_t* head_map) {
    LayerDensity d = dense_decode_density(shape);
    d.attended_keys = 0;
    const int begin = window_start(shape.n_k - 1, shape.effective_window());
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int source = head_map != nullptr ? head_map[h] : h;
        const int32_t* list = selection.list(source, 0);
        const int32_t* end = list + selection.size(source, 0);
        // Selected keys are ascending and before the query's tile: those from the window's start on are attended.
        const double keys = static_cast<double>(end - std::lower_bound(list, end, begin)) + own_tile_keys(shape, tile);
        d.attended_keys += shape.group_size() * keys;
    }
    return d;
}

}  // namespace kascade
