// tests/kernels/test_topk_tiles.cpp: the top-k budget rule and the tile selection, against the full-sort reference,
// with integer-valued scores so that ties are exact and the tie rule (lower tile index wins) is exercised; with a
// sliding window, candidates and budgets against a brute-force reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/reference/attention_reference.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

TileMass integer_scores(int n_kv_heads, int t, int tile, int levels, uint64_t seed) {
    TileMass m;
    m.n_kv_heads = n_kv_heads;
    m.n_q_tiles = m.n_k_tiles = tile_count(t, tile);
    m.tile = tile;
    m.mass.resize(static_cast<size_t>(n_kv_heads) * m.n_q_tiles * m.n_k_tiles);
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> dist(0, levels - 1);
    for (float& x : m.mass) x = static_cast<float>(dist(gen));
    return m;
}

TEST(TopkTiles, BudgetFollowsTheRule) {
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 0, 16), 0);
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 5, 16), 5);  // capped by the candidates
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 40, 16), 12);
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128}, 10, 32), 4);    // 352 keys visible: floor 128 tokens = 4 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128}, 99, 32), 10);   // 3200 visible: 320 tokens = 10 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128}, 100, 32), 11);  // 3232 visible: 323 tokens -> 11 tiles (ceil)
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 25, 0}, 3, 16), 1);       // 64 visible: 16 tokens = 1 tile
    for (int tile : {16, 32, 64})
        for (int qt = 0; qt < 300; ++qt)
            for (const TopKRule& rule : {TopKRule{3, 0, 128}, TopKRule{0, 10, 128}, TopKRule{0, 2.5f, 64}}) {
                SCOPED_TRACE("budget(tile=" + std::to_string(tile) + ",qt=" + std::to_string(qt) + ")");
                ASSERT_EQ(topk_tile_budget(rule, qt, tile), reference::topk_budget(rule, qt, tile));
            }
}

TEST(TopkTiles, WindowLimitsCandidatesAndBudget) {
    // Query tile 10 of 16-token tiles starts at position 160; a 40-key window reaches back to key 121 (tile 7), so
    // its candidates are tiles 7, 8, 9.
    EXPECT_EQ(first_window_tile(10, 16, 40), 7);
    EXPECT_EQ(first_window_tile(10, 16, 0), 0);
    EXPECT_EQ(first_window_tile(10, 16, 161), 0);                      // reaches key 0
    EXPECT_EQ(first_window_tile(10, 16, 1), 10);                       // one key: only the diagonal
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 10, 16, 40), 3);  // capped by the 3 candidates
    EXPECT_EQ(topk_tile_budget(TopKRule{2, 0, 128}, 10, 16, 40), 2);
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 10, 16, 1), 0);      // no candidate
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 50, 0}, 10, 16, 40), 2);       // 50% of the 40 keys in the window: 20 -> 2
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 50, 0}, 10, 16, 0), 6);        // 50% of 176 visible: 88 tokens -> 6 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128}, 100, 32, 1000), 4);  // floor 128 tokens = 4 of 32 candidates
    for (int tile : {16, 32})
        for (int qt = 0; qt < 40; ++qt)
            for (int w : {1, 7, 16, 33, 100, 1000})
                for (const TopKRule& rule : {TopKRule{3, 0, 128}, TopKRule{0, 10, 32}, TopKRule{0, 40, 0}}) {
                    SCOPED_TRACE("budget(tile=" + std::to_string(tile) + ",qt=" + std::to_string(qt) +
                                 ",window=" + std::to_string(w) + ")");
                    ASSERT_EQ(first_window_tile(qt, tile, w),
                              qt - static_cast<int>(reference::candidate_tiles(qt, tile, w).size()));
                    ASSERT_EQ(topk_tile_budget(rule, qt, tile, w), reference::topk_budget(rule, qt, tile, w));
                }
}

TEST(TopkTiles, SelectionMatchesReferenceWithTies) {
    for (int tile : {16, 32, 64}) {
        for (int t : {1, 17, 512, 1000, 3000}) {
            for (const TopKRule& rule : {TopKRule{3, 0, 128}, TopKRule{0, 10, 128}, TopKRule{0, 25, 32}}) {
                const std::string name = "topk(T=" + std::to_string(t) + ",tile=" + std::to_string(tile) +
                                         ",tiles=" + std::to_string(rule.tiles) + ",pct=" + std::to_string(rule.pct) +
                                         ")";
                SCOPED_TRACE(name);
                const TileMass scores = integer_scores(3, t, tile, 4, 7 + t + tile);
                const TileSelection got = select_topk_tiles(scores, rule);
                const TileSelection ref = reference::select_topk(scores, rule);
                ASSERT_EQ(got.n_kv_heads, ref.n_kv_heads);
                ASSERT_EQ(got.n_q_tiles, ref.n_q_tiles);
                ASSERT_EQ(got.max_k, ref.max_k);
                ASSERT_EQ(got.count, ref.count);
                for (int h = 0; h < got.n_kv_heads; ++h) {
                    for (int qt = 0; qt < got.n_q_tiles; ++qt) {
                        const std::vector<int32_t> a(got.list(h, qt), got.list(h, qt) + got.size(h, qt));
                        const std::vector<int32_t> b(ref.list(h, qt), ref.list(h, qt) + ref.size(h, qt));
                        ASSERT_EQ(a, b) << "kv_head " << h << " q_tile " << qt;
                        for (int32_t x : a) ASSERT_LT(x, qt) << "selected a tile at or after the diagonal";
                    }
                }
            }
        }
    }
}

TEST(TopkTiles, WindowedSelectionMatchesReference) {
    for (int tile : {16, 32}) {
        for (int t : {31, 33, 129, 1000}) {
            for (int w : {1, 7, 33, 100, 500}) {
                if (w >= t) continue;
                for (const TopKRule& rule : {TopKRule{3, 0, 128}, TopKRule{0, 25, 32}, TopKRule{1000, 0, 0}}) {
                    SCOPED_TRACE("topk_window(T=" + std::to_string(t) + ",tile=" + std::to_string(tile) +
                                 ",window=" + std::to_string(w) + ",tiles=" + std::to_string(rule.tiles) + ")");
                    TileMass scores = integer_scores(2, t, tile, 4, 5 + t + w);
                    scores.window = w;
                    const TileSelection got = select_topk_tiles(scores, rule);
                    const TileSelection ref = reference::select_topk(scores, rule);
                    ASSERT_EQ(got.max_k, ref.max_k);
                    ASSERT_EQ(got.count, ref.count);
                    for (int h = 0; h < got.n_kv_heads; ++h) {
                        for (int qt = 0; qt < got.n_q_tiles; ++qt) {
                            const std::vector<int32_t> a(got.list(h, qt), got.list(h, qt) + got.size(h, qt));
                            const std::vector<int32_t> b(ref.list(h, qt), ref.list(h, qt) + ref.size(h, qt));
                            ASSERT_EQ(a, b) << "kv_head " << h << " q_tile " << qt;
                            for (int32_t x : a) ASSERT_GE(x, first_window_tile(qt, tile, w)) << "outside the window";
                        }
                    }
                }
            }
        }
    }
}

TEST(TopkTiles, AllEqualScoresKeepTheEarliestTiles) {
    TileMass m = integer_scores(1, 640, 64, 1, 1);  // every score 0
    const TileSelection sel = select_topk_tiles(m, TopKRule{2, 0, 0});
    for (int qt = 2; qt < sel.n_q_tiles; ++qt) {
        EXPECT_EQ(sel.list(0, qt)[0], 0);
        EXPECT_EQ(sel.list(0, qt)[1], 1);
    }
}

TEST(TopkTiles, ThreadCountDoesNotChangeResults) {
    const TileMass scores = integer_scores(4, 4000, 16, 3, 99);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const TileSelection a = select_topk_tiles(scores, TopKRule{0, 10, 128});
    omp_set_num_threads(2);
    const TileSelection b = select_topk_tiles(scores, TopKRule{0, 10, 128});
    omp_set_num_threads(saved);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.tiles, b.tiles);
}

}  // namespace
}  // namespace kascade
