// tests/runtime/test_token_policies.cpp: token-granularity pieces of the policies against hand-derived values: the
// density of a token selection under a sliding window, and the token-level streaming set (sinks + recent keys), with
// and without a window.
#include <gtest/gtest.h>

#include <vector>

#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/streaming_attention.h"

using namespace kascade;

namespace {

TEST(TokenPolicies, DensityCountsSelectedKeysInsideEachRowsWindow) {
    // 20 tokens, tiles of 8, window 5, one KV head with two query heads. Query tile 1 (rows 8..15) keeps keys 2, 6, 7;
    // query tile 2 (rows 16..19) keeps key 5.
    const AttnShape shape{
        .n_q_heads = 2, .n_kv_heads = 1, .head_dim = 8, .n_q = 20, .n_k = 20, .kv_stride = 20, .scale = 1, .window = 5};
    TokenSelection sel;
    sel.n_kv_heads = 1;
    sel.n_q_tiles = 3;
    sel.max_k = 3;
    sel.tile = 8;
    sel.count = {0, 3, 1};
    sel.keys = {0, 0, 0, 2, 6, 7, 5, 0, 0};
    // Row p sees keys p-4..p. Tile 0: own keys 1,2,3,4,5,5,5,5 = 30. Tile 1: rows 8, 9, 10 see keys 6 and 7, row 11
    // only 7, rows 12..15 none (= 7); own 1,2,3,4,5,5,5,5 (= 30). Tile 2: key 5 is outside every row's window; own
    // 1,2,3,4 (= 10). Per query head 30 + 37 + 10 = 77 of the 1+2+3+4+16*5 = 90 windowed causal keys.
    const LayerDensity d = token_sparse_prefill_density(shape, 8, sel, nullptr);
    EXPECT_EQ(d.attended_keys, 2 * 77.0);
    EXPECT_EQ(d.causal_keys, 2 * 90.0);
    // Through a head map onto a two-head selection whose head 1 keeps nothing: only the diagonal tiles (30+30+10).
    TokenSelection two = sel;
    two.n_kv_heads = 2;
    two.count = {0, 3, 1, 0, 0, 0};
    two.keys.resize(18, 0);
    const int32_t to_head_1[] = {1};
    EXPECT_EQ(token_sparse_prefill_density(shape, 8, two, to_head_1).attended_keys, 2 * 70.0);
}

std::vector<int32_t> keys_of(const TokenSelection& s, int qt) {
    return std::vector<int32_t>(s.list(0, qt), s.list(0, qt) + s.size(0, qt));
}

std::vector<int32_t> range(int begin, int end) {
    std::vector<int32_t> r;
    for (int j = begin; j < end; ++j) r.push_back(j);
    return r;
}

TEST(TokenPolicies, StreamingKeepsTheSinkTileAndTheMostRecentKeys) {
    // 100 tokens, tiles of 16, 3 tiles of budget = 48 keys: keys 0..15 as sinks plus the 32 keys before the tile.
    const TokenSelection s = streaming_token_selection(100, 16, {.tiles = 3});
    ASSERT_EQ(s.n_q_tiles, 7);
    EXPECT_EQ(keys_of(s, 0), range(0, 0));
    EXPECT_EQ(keys_of(s, 1), range(0, 16));  // 16 candidates: all of them
    EXPECT_EQ(keys_of(s, 2), range(0, 32));
    EXPECT_EQ(keys_of(s, 3), range(0, 48));
    std::vector<int32_t> tile4 = range(0, 16), recent = range(32, 64);
    tile4.insert(tile4.end(), recent.begin(), recent.end());
    EXPECT_EQ(keys_of(s, 4), tile4);
    std::vector<int32_t> tile6 = range(0, 16), recent6 = range(64, 96);
    tile6.insert(tile6.end(), recent6.begin(), recent6.end());
    EXPECT_EQ(keys_of(s, 6), tile6);
}

TEST(TokenPolicies, StreamingWithWindowGivesTheSinkBudgetToRecentKeys) {
    // 40 tokens, tiles of 8, window 12, 8 keys of budget. Query tile t's first row reaches back to key 8t - 11: key 0
    // for t = 1 (sinks 0..7), key 5 for t = 2, key 13 for t = 3 (no sink: the 8 keys before the tile).
    const TokenSelection s = streaming_token_selection(40, 8, {.tiles = 1}, 12);
    EXPECT_EQ(keys_of(s, 1), range(0, 8));
    EXPECT_EQ(keys_of(s, 2), range(8, 16));
    EXPECT_EQ(keys_of(s, 3), range(16, 24));
    EXPECT_EQ(keys_of(s, 4), range(24, 32));
}

}  // namespace
