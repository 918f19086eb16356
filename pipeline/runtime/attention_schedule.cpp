#include "pipeline/runtime/attention_schedule.h"

#include <algorithm>

namespace kascade {

AttentionSchedule AttentionSchedule::all_dense(int n_layers) {
    AttentionSchedule s;
    s.layers.resize(n_layers);
    return s;
}

AttentionSchedule AttentionSchedule::oracle(int n_layers) {
    AttentionSchedule s = all_dense(n_layers);
    for (int l = 1; l < n_layers; ++l) s.layers[l].role = LayerRole::Anchor;
    return s;
}

bool AttentionSchedule::is_anchor_for_reuse(int layer) const {
    return std::any_of(layers.begin(), layers.end(),
                       [&](const LayerPlan& p) { return p.role == LayerRole::Reuse && p.anchor == layer; });
}

int AttentionSchedule::count(LayerRole role) const {
    return static_cast<int>(
        std::count_if(layers.begin(), layers.end(), [&](const LayerPlan& p) { return p.role == role; }));
}

}  // namespace kascade
