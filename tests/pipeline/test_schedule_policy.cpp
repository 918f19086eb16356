// tests/pipeline/test_schedule_policy.cpp: the threshold, dp and fixed schedule policies on hand-made similarity
// tables, the dp against brute-force enumeration of every anchor set.
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "pipeline/stages/schedule_policy.h"

using namespace kascade;

namespace {

/// A similarity table with one value per layer pair, the same for every head pair.
LayerSimilarity uniform_heads(int n_layers, int n_kv_heads, const std::vector<std::vector<float>>& score) {
    LayerSimilarity s;
    s.n_layers = n_layers;
    s.n_kv_heads = n_kv_heads;
    s.head.assign(static_cast<size_t>(n_layers) * n_layers * n_kv_heads * n_kv_heads, 0.0f);
    for (int b = 0; b < n_layers; ++b)
        for (int a = 0; a < b; ++a)
            for (int hb = 0; hb < n_kv_heads; ++hb)
                for (int ha = 0; ha < n_kv_heads; ++ha) s.at(b, a, hb, ha) = score[b][a];
    return s;
}

std::vector<int> roles_as_anchor_list(const AttentionSchedule& s) {
    return schedule_anchor_layers(s);
}

TEST(SchedulePolicy, ThresholdWalksLayersAndRespectsMaxDistance) {
    // score[b][a]
    const std::vector<std::vector<float>> score = {
        {}, {0.9f}, {0.8f, 0.3f}, {0.4f, 0.2f, 0.95f}, {0.9f, 0.9f, 0.9f, 0.9f}, {0.9f, 0.9f, 0.9f, 0.9f, 0.9f},
    };
    const LayerSimilarity sim = uniform_heads(6, 1, score);
    // t = 0.7: 1 reuses 0 (0.9), 2 reuses 0 (0.8), 3 vs 0 is 0.4 -> anchor, 4 reuses 3, 5 reuses 3.
    AttentionSchedule s = schedule_threshold(sim, 0.7, 8, HeadMapMode::Identity);
    EXPECT_EQ(roles_as_anchor_list(s), (std::vector<int>{0, 3}));
    EXPECT_EQ(s.layers[0].role, LayerRole::Dense);
    EXPECT_EQ(s.layers[3].role, LayerRole::Anchor);
    EXPECT_EQ(s.layers[5].role, LayerRole::Reuse);
    EXPECT_EQ(s.layers[5].anchor, 3);
    // Max distance 1: 1 reuses 0; 2 is two layers from 0 -> anchor; 3 reuses 2 (0.95); 4 is two from 2 -> anchor;
    // 5 reuses 4.
    s = schedule_threshold(sim, 0.7, 1, HeadMapMode::Identity);
    EXPECT_EQ(roles_as_anchor_list(s), (std::vector<int>{0, 2, 4}));
    // Threshold 1: nothing is similar enough, every layer is an anchor.
    s = schedule_threshold(sim, 1.0, 8, HeadMapMode::Identity);
    EXPECT_EQ(roles_as_anchor_list(s), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(SchedulePolicy, ArgmaxHeadMapTakesTheBestAnchorHead) {
    LayerSimilarity sim = uniform_heads(2, 3, {{}, {0.0f}});
    // Layer 1 head 0 is served best by anchor head 2, head 1 by head 0, head 2 ties between 1 and 2 -> 1.
    sim.at(1, 0, 0, 2) = 0.9f;
    sim.at(1, 0, 1, 0) = 0.8f;
    sim.at(1, 0, 2, 1) = 0.7f;
    sim.at(1, 0, 2, 2) = 0.7f;
    const AttentionSchedule s = schedule_threshold(sim, 0.0, 4, HeadMapMode::Argmax);
    ASSERT_EQ(s.layers[1].role, LayerRole::Reuse);
    EXPECT_EQ(s.layers[1].head_map, (std::vector<int32_t>{2, 0, 1}));
    EXPECT_NEAR(sim.layer_score(0, 1), (0.9 + 0.8 + 0.7) / 3, 1e-6);
    EXPECT_EQ(schedule_threshold(sim, 0.0, 4, HeadMapMode::Identity).layers[1].head_map,
              (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(schedule_threshold(sim, 0.0, 4, HeadMapMode::Pooled).layers[1].head_map, (std::vector<int32_t>{0, 0, 0}));
}

/// The objective the dp maximises, evaluated directly for one anchor set.
double objective(const LayerSimilarity& sim, const std::vector<int>& anchors) {
    double total = 0;
    int current = 0;
    size_t next = 0;
    for (int j = 0; j < sim.n_layers; ++j) {
        if (next < anchors.size() && anchors[next] == j) {
            current = j;
            ++next;
        }
        total +=
            (sim.importance.empty() ? 1.0 : sim.importance[j]) * (j == current ? 1.0 : sim.layer_score(current, j));
    }
    return total;
}

TEST(SchedulePolicy, DynamicProgramMatchesBruteForce) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int trial = 0; trial < 20; ++trial) {
        const int L = 3 + trial % 6, H = 1 + trial % 3;
        LayerSimilarity sim = uniform_heads(L, H, std::vector<std::vector<float>>(L, std::vector<float>(L, 0.0f)));
        for (float& v : sim.head) v = u(rng);
        sim.importance.resize(L);
        for (float& w : sim.importance) w = u(rng);
        for (int K = 1; K <= L; ++K) {
            SCOPED_TRACE("dp(L=" + std::to_string(L) + ",H=" + std::to_string(H) + ",K=" + std::to_string(K) + ")");
            const std::vector<int> dp = roles_as_anchor_list(schedule_dp(sim, K, HeadMapMode::Argmax));
            ASSERT_EQ(static_cast<int>(dp.size()), K);
            EXPECT_EQ(dp[0], 0);
            double best = -1;
            for (unsigned mask = 0; mask < (1u << (L - 1)); ++mask) {  // bits: layers 1..L-1
                std::vector<int> anchors{0};
                for (int l = 1; l < L; ++l)
                    if (mask >> (l - 1) & 1) anchors.push_back(l);
                if (static_cast<int>(anchors.size()) == K) best = std::max(best, objective(sim, anchors));
            }
            EXPECT_NEAR(objective(sim, dp), best, 1e-9);
        }
    }
}

TEST(SchedulePolicy, FixedListAndBadParameters) {
    const LayerSimilarity sim = uniform_heads(5, 2, std::vector<std::vector<float>>(5, std::vector<float>(5, 0.5f)));
    const AttentionSchedule s = schedule_fixed(sim, {0, 2}, HeadMapMode::Identity);
    EXPECT_EQ(roles_as_anchor_list(s), (std::vector<int>{0, 2}));
    EXPECT_EQ(s.layers[1].anchor, 0);
    EXPECT_EQ(s.layers[4].anchor, 2);
    EXPECT_THROW(schedule_fixed(sim, {1, 2}, HeadMapMode::Identity), Error);
    EXPECT_THROW(schedule_fixed(sim, {0, 7}, HeadMapMode::Identity), Error);
    EXPECT_THROW(schedule_dp(sim, 0, HeadMapMode::Identity), Error);
    EXPECT_THROW(schedule_dp(sim, 6, HeadMapMode::Identity), Error);
    EXPECT_THROW(schedule_threshold(sim, 1.5, 4, HeadMapMode::Identity), Error);
    EXPECT_THROW(schedule_threshold(sim, 0.5, 0, HeadMapMode::Identity), Error);
    EXPECT_THROW(parse_mode<HeadMapMode>("argmin", "--head-map"), Error);
}

}  // namespace
