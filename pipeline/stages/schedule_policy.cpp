#include "pipeline/stages/schedule_policy.h"

#include <limits>
#include <numeric>

#include "base/error.h"

namespace kascade {

namespace {

std::vector<int32_t> head_map_for(const LayerSimilarity& sim, HeadMapMode mode, int anchor, int layer) {
    switch (mode) {
        case HeadMapMode::Argmax:
            return sim.best_head_map(anchor, layer);
        case HeadMapMode::Identity: {
            std::vector<int32_t> map(sim.n_kv_heads);
            std::iota(map.begin(), map.end(), 0);
            return map;
        }
        case HeadMapMode::Pooled:
            return std::vector<int32_t>(sim.n_kv_heads, 0);
    }
    return {};
}

/// Builds the schedule in which `anchors` (ascending, starting at 0) are anchors and every other layer reuses the
/// last anchor before it.
AttentionSchedule schedule_from_anchors(const LayerSimilarity& sim, const std::vector<int>& anchors, HeadMapMode mode) {
    AttentionSchedule s;
    s.layers.resize(sim.n_layers);
    size_t next = 0;
    int current = 0;
    for (int l = 0; l < sim.n_layers; ++l) {
        if (next < anchors.size() && anchors[next] == l) {
            s.layers[l].role = l == 0 ? LayerRole::Dense : LayerRole::Anchor;
            current = l;
            ++next;
        } else {
            s.layers[l].role = LayerRole::Reuse;
            s.layers[l].anchor = current;
            s.layers[l].head_map = head_map_for(sim, mode, current, l);
        }
    }
    return s;
}

}  // namespace

AttentionSchedule schedule_threshold(const LayerSimilarity& sim, double threshold, int max_reuse_dist,
                                     HeadMapMode head_map) {
    KASCADE_CHECK(threshold >= 0 && threshold <= 1, "invalid threshold={} (must be in [0, 1])", threshold);
    KASCADE_CHECK(max_reuse_dist >= 1, "invalid max_reuse_dist={} (must be >= 1)", max_reuse_dist);
    std::vector<int> anchors{0};
    for (int b = 1; b < sim.n_layers; ++b) {
        const int a = anchors.back();
        const bool reuse = b - a <= max_reuse_dist && sim.layer_score(a, b) >= threshold;
        if (!reuse) anchors.push_back(b);
    }
    return schedule_from_anchors(sim, anchors, head_map);
}

AttentionSchedule schedule_dp(const LayerSimilarity& sim, int n_anchors, HeadMapMode head_map) {
    const int L = sim.n_layers;
    KASCADE_CHECK(n_anchors >= 1 && n_anchors <= L, "invalid anchors={} (must be in [1, {}], the layer count)",
                  n_anchors, L);
    auto weight = [&](int j) { return sim.importance.empty() ? 1.0 : static_cast<double>(sim.importance[j]); };
    // segment[a][e]: score of layers a..e-1 when a is their anchor.
    std::vector<std::vector<double>> segment(L, std::vector<double>(L + 1, 0.0));
    for (int a = 0; a < L; ++a)
        for (int e = a + 1; e <= L; ++e) segment[a][e] = segment[a][e - 1] + weight(e - 1) * sim.layer_score(a, e - 1);
    // best[k][e]: best score of layers 0..e-1 with k anchors, the k-th anchor's segment ending at e-1.
    constexpr double kNone = -std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(n_anchors + 1, std::vector<double>(L + 1, kNone));
    std::vector<std::vector<int>> last_anchor(n_anchors + 1, std::vector<int>(L + 1, -1));
    for (int e = 1; e <= L; ++e) {
        best[1][e] = segment[0][e];
        last_anchor[1][e] = 0;
    }
    for (int k = 2; k <= n_anchors; ++k) {
        for (int e = k; e <= L; ++e) {
            for (int a = k - 1; a < e; ++a) {  // strict > keeps the earliest anchor on ties: deterministic
                const double v = best[k - 1][a] + segment[a][e];
                if (best[k - 1][a] > kNone && v > best[k][e]) {
                    best[k][e] = v;
                    last_anchor[k][e] = a;
                }
            }
        }
    }
    std::vector<int> anchors(n_anchors);
    for (int k = n_anchors, e = L; k >= 1; --k) {
        anchors[k - 1] = last_anchor[k][e];
        e = anchors[k - 1];
    }
    return schedule_from_anchors(sim, anchors, head_map);
}

AttentionSchedule schedule_fixed(const LayerSimilarity& sim, const std::vector<int>& anchors, HeadMapMode head_map) {
    KASCADE_CHECK(!anchors.empty() && anchors[0] == 0, "invalid anchor list: it must start with layer 0");
    for (size_t i = 1; i < anchors.size(); ++i) {
        KASCADE_CHECK(anchors[i] > anchors[i - 1] && anchors[i] < sim.n_layers,
                      "invalid anchor list: layers must be increasing and below {} (got {} after {})", sim.n_layers,
                      anchors[i], anchors[i - 1]);
    }
    return schedule_from_anchors(sim, anchors, head_map);
}

std::vector<int> schedule_anchor_layers(const AttentionSchedule& schedule) {
    std::vector<int> anchors;
    for (int l = 0; l < static_cast<int>(schedule.layers.size()); ++l) {
        if (schedule.layers[l].role != LayerRole::Reuse) anchors.push_back(l);
    }
    return anchors;
}

}  // namespace kascade
