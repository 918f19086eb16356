// pipeline/stages/schedule_policy.h: choosing which layers are anchors and which reuse an anchor's tiles.
//
//   threshold: walk the layers; layer b reuses the most recent anchor a if score(a, b) >= threshold and
//              b - a <= max_reuse_dist, else b becomes an anchor (the prototype's policy).
//   dp:        the paper's dynamic program: exactly K anchors (layer 0 included) maximising
//              sum_j w_j * score(anchor(j), j), anchor(j) the last anchor <= j, w_j the layer importance
//              (score(j, j) = 1).
//   fixed:     a given anchor list (must start with 0).
// Layer 0 is always dense and serves as the first anchor. Head maps: argmax (each reuse KV head takes the anchor
// head that serves it best), identity, or pooled (all heads share one tile set; the map is all zeros).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/runtime/attention_schedule.h"
#include "pipeline/stages/layer_similarity.h"

namespace kascade {

// SchedulePolicy and HeadMapMode, with their names: base/modes.h.

AttentionSchedule schedule_threshold(const LayerSimilarity& sim, double threshold, int max_reuse_dist,
                                     HeadMapMode head_map);
AttentionSchedule schedule_dp(const LayerSimilarity& sim, int n_anchors, HeadMapMode head_map);
AttentionSchedule schedule_fixed(const LayerSimilarity& sim, const std::vector<int>& anchors, HeadMapMode head_map);

/// The anchor layers of a schedule (layer 0 first), as the dp and fixed policies see them.
std::vector<int> schedule_anchor_layers(const AttentionSchedule& schedule);

}  // namespace kascade
