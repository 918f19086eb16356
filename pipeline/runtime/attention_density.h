// pipeline/runtime/attention_density.h: counting how many keys a sparse layer actually attends, against the keys
// dense causal attention would have used (inside the layer's sliding window, if it has one), summed over query heads
// and query rows.
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace kascade {

struct LayerDensity {
    double attended_keys = 0;
    double causal_keys = 0;  ///< keys dense attention sees: causal and, with a window, inside it

    double ratio() const { return causal_keys > 0 ? attended_keys / causal_keys : 1.0; }
    void add(const LayerDensity& o) {
        attended_keys += o.attended_keys;
        causal_keys += o.causal_keys;
    }
};

/// Dense prefill of `shape` (n_q == n_k): every query head row p sees min(p + 1, window) keys (p + 1 without a
/// window), and attends all of them (density 1).
LayerDensity dense_prefill_density(const AttnShape& shape);

/// Sparse prefill: each row sees the keys of its query tile's selected key tiles and the causal part of its own tile
/// that lie inside its window (all of them without one). head_map as in attn_sparse_prefill (null = identity). The
/// selection may come from a layer with another window: only the keys this layer actually attends count.
LayerDensity sparse_prefill_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                    const int32_t* head_map);

/// Token-level sparse prefill: each row sees the selected keys of its query tile and the causal part of its own tile
/// that lie inside its window. head_map as in attn_token_sparse_prefill.
LayerDensity token_sparse_prefill_density(const AttnShape& shape, int tile, const TokenSelection& selection,
                                          const int32_t* head_map);

/// Dense decode of `shape` (n_q == 1, the query at position n_k - 1): every query head sees min(n_k, window) keys
/// (n_k without a window) and attends all of them.
LayerDensity dense_decode_density(const AttnShape& shape);

/// Tile-sparse decode (attn_sparse_decode): per query head the keys of its (mapped) KV head's selected tiles
/// (selection.list(source, 0), a decode selection) and of the query's own tile, counting only keys inside the query's
/// window. head_map as in attn_sparse_decode (null = identity).
LayerDensity sparse_decode_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                   const int32_t* head_map);

/// Token-level sparse decode (attn_token_sparse_decode): the selected keys inside the query's window plus the keys of
/// its own tile inside it.
LayerDensity token_sparse_decode_density(const AttnShape& shape, int tile, const TokenSelection& selection,
                                         const int32_t* head_map);

}  // namespace kascade
