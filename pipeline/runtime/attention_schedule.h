// pipeline/runtime/attention_schedule.h: what each layer does under Kascade, as plain data.
//
// A schedule gives every layer a role: dense (exact attention; layer 0 always), anchor (scores all keys, keeps its
// top-k key tiles, attends to those) or reuse (attends to the tiles its anchor kept, through a head map from its KV
// heads to the anchor's). Dense layers also serve as anchors for the reuse layers that follow them.
#pragma once

#include <cstdint>
#include <vector>

#include "base/modes.h"  // LayerRole

namespace kascade {

struct LayerPlan {
    LayerRole role = LayerRole::Dense;
    int anchor = -1;                ///< reuse layers: the earlier layer whose selection they use
    std::vector<int32_t> head_map;  ///< reuse layers: [n_kv_heads] anchor KV head for each of this layer's KV heads
};

struct AttentionSchedule {
    std::vector<LayerPlan> layers;

    /// Every layer dense: the baseline.
    static AttentionSchedule all_dense(int n_layers);
    /// Layer 0 dense, every other layer an anchor of its own (the oracle top-k ceiling).
    static AttentionSchedule oracle(int n_layers);

    bool is_anchor_for_reuse(int layer) const;  ///< some reuse layer reads this layer's selection
    int count(LayerRole role) const;
};

}  // namespace kascade
