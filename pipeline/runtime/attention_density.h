// pipeline/runtime/attention_density.h: counting how many keys a sparse layer actually attends, against the keys
// dense causal attention would have used, summed over query heads and query rows.
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace kascade {

struct LayerDensity {
    double attended_keys = 0;
    double causal_keys = 0;

    double ratio() const { return causal_keys > 0 ? attended_keys / causal_keys : 1.0; }
    void add(const LayerDensity& o) {
        attended_keys += o.attended_keys;
        causal_keys += o.causal_keys;
    }
};

/// Dense causal prefill of `shape` (n_q == n_k): every query head row p sees p + 1 keys.
LayerDensity dense_prefill_density(const AttnShape& shape);

/// Sparse prefill: each row sees its query tile's selected key tiles (all full, being before the diagonal) plus
/// the causal part of its own tile. head_map as in attn_sparse_prefill (null = identity).
LayerDensity sparse_prefill_density(const AttnShape& shape, int tile, const TileSelection& selection,
                                    const int32_t* head_map);

}  // namespace kascade
