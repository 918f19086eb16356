#include "pipeline/runtime/attention_density.h"

#include <algorithm>

namespace kascade {

LayerDensity dense_prefill_density(const AttnShape& shape) {
    const double n = shape.n_q;
    const double per_head = n * (n + 1) / 2;
    return {per_head * shape.n_q_heads, per_head * shape.n_q_heads};
}

LayerDensity sparse_prefill_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                    const int32_t* head_map) {
    LayerDensity d = dense_prefill_density(shape);
    d.attended_keys = 0;
    const int n = shape.n_q;
    const int n_tiles = tile_count(n, tile);
    const int group = shape.group_size();
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int source = head_map != nullptr ? head_map[h] : h;
        for (int qt = 0; qt < n_tiles; ++qt) {
            const double rows = std::min(tile, n - qt * tile);
            const double selected = static_cast<double>(selection.size(source, qt)) * tile;
            // Row r of the tile (0-based) sees r + 1 keys of its own tile.
            d.attended_keys += group * (rows * selected + rows * (rows + 1) / 2);
        }
    }
    return d;
}

}  // namespace kascade
