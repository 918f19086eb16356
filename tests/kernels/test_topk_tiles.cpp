// tests/kernels/test_topk_tiles.cpp: the top-k budget rule and the tile selection, against the full-sort reference,
// with integer-valued scores so that ties are exact and the tie rule (lower tile index wins) is exercised; with a
// sliding window, candidates and budgets against a brute-force reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/attention_reference.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

constexpr int kKeys = 100000;  ///< sequence length given to budgets that do not depend on it

TileMass integer_scores(int n_kv_heads, int t, int tile, int levels, uint64_t seed) {
    TileMass m;
    m.n_kv_heads = n_kv_heads;
    m.n_q_tiles = m.n_k_tiles = tile_count(t, tile);
    m.tile = tile;
    m.n_keys = t;
    m.mass.resize(static_cast<size_t>(n_kv_heads) * m.n_q_tiles * m.n_k_tiles);
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> dist(0, levels - 1);
    for (float& x : m.mass) x = static_cast<float>(dist(gen));
    return m;
}

TEST(TopkTiles, BudgetFollowsTheRule) {
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 0, 16, kKeys), 0);
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 5, 16, kKeys), 5);  // capped by the candidates
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 40, 16, kKeys), 12);
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128, KRule::Visible}, 10, 32, kKeys),
              4);  // 352 keys visible: floor 128 tokens = 4 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128, KRule::Visible}, 99, 32, kKeys),
              10);  // 3200 visible: 320 tokens = 10 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128, KRule::Visible}, 100, 32, kKeys),
              11);  // 3232 visible: 323 tokens -> 11 tiles (ceil)
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 25, 0, KRule::Visible}, 3, 16, kKeys), 1);  // 64 visible: 16 tokens = 1 tile
    for (int tile : {16, 32, 64})
        for (int qt = 0; qt < 300; ++qt)
            for (const TopKRule& rule :
                 {TopKRule{3, 0, 128}, TopKRule{0, 10, 128, KRule::Visible}, TopKRule{0, 2.5f, 64, KRule::Visible}}) {
                SCOPED_TRACE("budget(tile=" + std::to_string(tile) + ",qt=" + std::to_string(qt) + ")");
                ASSERT_EQ(topk_tile_budget(rule, qt, tile, kKeys), reference::topk_budget(rule, qt, tile, kKeys));
            }
}

TEST(TopkTiles, WindowLimitsCandidatesAndBudget) {
    // Query tile 10 of 16-token tiles starts at position 160; a 40-key window reaches back to key 121 (tile 7), so
    // its candidates are tiles 7, 8, 9.
    EXPECT_EQ(first_window_tile(10, 16, 40), 7);
    EXPECT_EQ(first_window_tile(10, 16, 0), 0);
    EXPECT_EQ(first_window_tile(10, 16, 161), 0);                             // reaches key 0
    EXPECT_EQ(first_window_tile(10, 16, 1), 10);                              // one key: only the diagonal
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 10, 16, kKeys, 40), 3);  // capped by the 3 candidates
    EXPECT_EQ(topk_tile_budget(TopKRule{2, 0, 128}, 10, 16, kKeys, 40), 2);
    EXPECT_EQ(topk_tile_budget(TopKRule{12, 0, 128}, 10, 16, kKeys, 1), 0);  // no candidate
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 50, 0, KRule::Visible}, 10, 16, kKeys, 40),
              2);  // 50% of the 40 keys in the window: 20 -> 2
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 50, 0, KRule::Visible}, 10, 16, kKeys, 0),
              6);  // 50% of 176 visible: 88 tokens -> 6 tiles
    EXPECT_EQ(topk_tile_budget(TopKRule{0, 10, 128, KRule::Visible}, 100, 32, kKeys, 1000),
              4);  // floor 128 tokens = 4 of 32 candidates
    for (int tile : {16, 32})
        for (int qt = 0; qt < 40; ++qt)
            for (int w : {1, 7, 16, 33, 100, 1000})
                for (const TopKRule& rule :
                     {TopKRule{3, 0, 128}, TopKRule{0, 10, 32, KRule::Visible}, TopKRule{0, 40, 0, KRule::Visible}}) {
                    SCOPED_TRACE("budget(tile=" + std::to_string(tile) + ",qt=" + std::to_string(qt) +
                                 ",window=" + std::to_string(w) + ")");
                    ASSERT_EQ(first_window_tile(qt, tile, w),
                              qt - static_cast<int>(reference::candidate_tiles(qt, tile, w).size()));
                    ASSERT_EQ(topk_tile_budget(rule, qt, tile, kKeys, w),
                              reference::topk_budget(rule, qt, tile, kKeys, w));
                }
}

TEST(TopkTiles, SelectionMatchesReferenceWithTies) {
    for (int tile : {16, 32, 64}) {
        for (int t : {1, 17, 512, 1000, 3000}) {
            for (const TopKRule& rule :
                 {TopKRule{3, 0, 128}, TopKRule{0, 10, 128, KRule::Visible}, TopKRule{0, 25, 32, KRule::Visible}}) {
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
                for (const TopKRule& rule :
                     {TopKRule{3, 0, 128}, TopKRule{0, 25, 32, KRule::Visible}, TopKRule{1000, 0, 0}}) {
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
    const TileSelection a = select_topk_tiles(scores, TopKRule{0, 10, 128, KRule::Visible});
    omp_set_num_threads(2);
    const TileSelection b = select_topk_tiles(scores, TopKRule{0, 10, 128, KRule::Visible});
    omp_set_num_threads(saved);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.tiles, b.tiles);
}

TokenMass integer_token_scores(int n_kv_heads, int t, int tile, int levels, uint64_t seed) {
    TokenMass m;
    m.n_kv_heads = n_kv_heads;
    m.n_q_tiles = tile_count(t, tile);
    m.n_keys = t;
    m.tile = tile;
    m.mass.resize(static_cast<size_t>(n_kv_heads) * m.n_q_tiles * t);
    std::mt19937_64 gen(seed);
    std::uniform_int_distribution<int> dist(0, levels - 1);
    for (float& x : m.mass) x = static_cast<float>(dist(gen));
    return m;
}

// Every k rule, hand-derived from its formula (attention_types.h).
TEST(TopkRules, BudgetsFollowEachRule) {
    const TopKRule sequence{0, 10, 128, KRule::Sequence};
    // L = 8192: min(max(128, 819), 8192) - 32 = 787 keys; as tiles ceil(787 / 32) = 25.
    EXPECT_EQ(topk_key_count(sequence, 100, 32, 8192), 787);
    EXPECT_EQ(topk_token_budget(sequence, 100, 32, 8192), 787);
    EXPECT_EQ(topk_tile_budget(sequence, 100, 32, 8192), 25);
    EXPECT_EQ(topk_token_budget(sequence, 10, 32, 8192), 320);  // capped by the 320 keys before the tile
    EXPECT_EQ(topk_tile_budget(sequence, 10, 32, 8192), 10);
    EXPECT_EQ(topk_key_count(sequence, 3, 32, 100), 68);          // min(max(128, 10), 100) - 32
    EXPECT_EQ(topk_key_count(sequence, 0, 32, 20), 0);            // min(128, 20) - 32 < 0
    EXPECT_EQ(topk_key_count(sequence, 50, 32, 8192, 1000), 96);  // L = the 1000-key window: 128 - 32
    // Rolling: k_s = max(128, floor(10% of s)); tiles with s <= k_s keep every candidate (dense).
    const TopKRule rolling{0, 10, 128, KRule::Rolling};
    EXPECT_EQ(topk_token_budget(rolling, 100, 32, 8192), 320);  // s = 3200
    EXPECT_EQ(topk_token_budget(rolling, 4, 32, 8192), 128);    // s = 128 = k_s: all 128 candidates
    EXPECT_EQ(topk_token_budget(rolling, 2, 32, 8192), 64);     // s = 64 < 128: all 64 candidates
    EXPECT_EQ(topk_token_budget(rolling, 5, 32, 8192), 128);    // s = 160 > 128
    // round_k: 787 rounded up to a multiple of 128 = 896 keys = 28 tiles.
    TopKRule rounded = sequence;
    rounded.round_k = 128;
    EXPECT_EQ(topk_token_budget(rounded, 100, 32, 8192), 896);
    EXPECT_EQ(topk_tile_budget(rounded, 100, 32, 8192), 28);
    // Tile size 1: min(max(0, 100), 1000) - 1 = 99 keys.
    EXPECT_EQ(topk_token_budget(TopKRule{0, 10, 0, KRule::Sequence}, 500, 1, 1000), 99);
    // A fixed tile count at token granularity: tiles * tile keys.
    EXPECT_EQ(topk_token_budget(TopKRule{3, 0, 128}, 40, 16, 1000), 48);
    for (int tile : {1, 16, 32})
        for (int n_keys : {100, 1000, 5000})
            for (int w : {0, 7, 100, 1000})
                for (int qt = 0; qt < std::min(tile_count(n_keys, tile), 120); ++qt)
                    for (KRule kr : {KRule::Sequence, KRule::Rolling, KRule::Visible})
                        for (int round_k : {0, 128}) {
                            const TopKRule rule{0, 10, 32, kr, round_k};
                            SCOPED_TRACE("budget(tile=" + std::to_string(tile) + ",n_keys=" + std::to_string(n_keys) +
                                         ",window=" + std::to_string(w) + ",qt=" + std::to_string(qt) + ",rule=" +
                                         std::string(mode_name(kr)) + ",round_k=" + std::to_string(round_k) + ")");
                            ASSERT_EQ(topk_token_budget(rule, qt, tile, n_keys, w),
                                      reference::token_budget(rule, qt, tile, n_keys, w));
                            ASSERT_EQ(topk_tile_budget(rule, qt, tile, n_keys, w),
                                      reference::topk_budget(rule, qt, tile, n_keys, w));
                        }
}

TEST(TopkRules, NamesRoundTrip) {
    for (KRule r : {KRule::Sequence, KRule::Rolling, KRule::Visible}) EXPECT_EQ(mode_from_name<KRule>(mode_name(r)), r);
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile})
        EXPECT_EQ(mode_from_name<KeyGranularity>(mode_name(g)), g);
    for (Pooling p : {Pooling::PostSoftmax, Pooling::PreSoftmax}) EXPECT_EQ(mode_from_name<Pooling>(mode_name(p)), p);
    EXPECT_FALSE(mode_from_name<KRule>("paper").has_value());
    EXPECT_EQ(mode_name(KRule::Sequence), "sequence");
    EXPECT_EQ(mode_name(KeyGranularity::Token), "token");
    EXPECT_EQ(mode_name(Pooling::PostSoftmax), "post_softmax");
}

TEST(TopkTokens, SelectionMatchesReferenceWithTies) {
    for (int tile : {1, 16, 32}) {
        for (int t : {1, 17, 333, 1000}) {
            for (int w : {0, 7, 100}) {
                for (const TopKRule& rule :
                     {TopKRule{3, 0, 128}, TopKRule{0, 10, 32, KRule::Sequence}, TopKRule{0, 25, 32, KRule::Rolling},
                      TopKRule{0, 10, 16, KRule::Visible, 8}}) {
                    SCOPED_TRACE("topk_tokens(T=" + std::to_string(t) + ",tile=" + std::to_string(tile) +
                                 ",window=" + std::to_string(w) + ",tiles=" + std::to_string(rule.tiles) +
                                 ",rule=" + std::string(mode_name(rule.k_rule)) + ")");
                    TokenMass scores = integer_token_scores(2, t, tile, 3, 11 + t + tile + w);
                    scores.window = w;
                    const TokenSelection got = select_topk_tokens(scores, rule);
                    const TokenSelection ref = reference::select_topk_tokens(scores, rule);
                    ASSERT_EQ(got.max_k, ref.max_k);
                    ASSERT_EQ(got.count, ref.count);
                    for (int h = 0; h < got.n_kv_heads; ++h) {
                        for (int qt = 0; qt < got.n_q_tiles; ++qt) {
                            const std::vector<int32_t> a(got.list(h, qt), got.list(h, qt) + got.size(h, qt));
                            const std::vector<int32_t> b(ref.list(h, qt), ref.list(h, qt) + ref.size(h, qt));
                            ASSERT_EQ(a, b) << "kv_head " << h << " q_tile " << qt;
                            for (int32_t x : a) {
                                ASSERT_LT(x, qt * tile) << "selected a key of or after the query tile";
                                ASSERT_GE(x, first_window_key(qt, tile, w)) << "outside the window";
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST(TopkTokens, ThreadCountDoesNotChangeResults) {
    const TokenMass scores = integer_token_scores(3, 2000, 16, 3, 98);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const TokenSelection a = select_topk_tokens(scores, TopKRule{0, 10, 128});
    omp_set_num_threads(2);
    const TokenSelection b = select_topk_tokens(scores, TopKRule{0, 10, 128});
    omp_set_num_threads(saved);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.keys, b.keys);
}

}  // namespace
}  // namespace kascade
