// tests/kernels/test_decode_kernels.cpp: the sparse decode kernels against the double-precision references: decode
// budgets from the rule definitions, the anchor's decode scoring (post- and pre-softmax, per key and per key tile,
// with windows and across key pieces), the decode top-k against a full sort (ties, NaN), token-level sparse decode
// over gathered keys (head map, window, every key = dense) and over an anchor's kept scores, and Quest's page bounds,
// page scores and chosen pages against brute force.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/attention_tolerance.h"
#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "kernels/quest.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/sparse_attention.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

struct DecodeCase {
    int n_kv_heads, group, head_dim, n_k, tile, window;
    std::string name(const char* what) const {
        return std::string(what) + "(n_k=" + std::to_string(n_k) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",hkv=" + std::to_string(n_kv_heads) + ",d=" + std::to_string(head_dim) +
               ",tile=" + std::to_string(tile) + ",window=" + std::to_string(window) + ")";
    }
    reference::AttnInputs inputs(uint64_t seed) const {
        auto in = reference::random_inputs(n_kv_heads * group, n_kv_heads, head_dim, 1, n_k, seed);
        in.shape.window = window;
        return in;
    }
};

std::vector<DecodeCase> decode_cases() {
    std::vector<DecodeCase> cases;
    for (int group : {1, 3, 4})
        for (int n_k : {1, 17, 100, 1100})
            for (int tile : {1, 16, 32}) cases.push_back({2, group, 64, n_k, tile, 0});
    cases.push_back({1, 2, 8, 2500, 16, 0});  // three key pieces
    cases.push_back({3, 3, 128, 333, 32, 0});
    cases.push_back({2, 2, 64, 1500, 16, 700});  // windows: candidates start inside a tile
    cases.push_back({2, 4, 64, 300, 32, 37});
    cases.push_back({1, 1, 8, 50, 1, 9});
    cases.push_back({2, 2, 16, 40, 16, 100});  // a window longer than the cache changes nothing
    return cases;
}

TEST(DecodeScoring, BudgetsMatchTheRuleDefinitions) {
    const TopKRule rules[] = {{.tiles = 3},
                              {.tiles = 0, .pct = 10, .k_min_tokens = 20},
                              {.tiles = 0, .pct = 30, .k_min_tokens = 0, .k_rule = KRule::Rolling},
                              {.tiles = 0, .pct = 25, .k_min_tokens = 8, .k_rule = KRule::Visible, .round_k = 16},
                              {.tiles = 1000}};
    for (const TopKRule& rule : rules) {
        for (int tile : {1, 16, 32}) {
            for (int n_k : {1, 2, 16, 17, 33, 100, 517}) {
                for (int window : {0, 5, 40, 1000}) {
                    const int w = window < n_k ? window : 0;  // as AttnShape::effective_window()
                    SCOPED_TRACE("tile=" + std::to_string(tile) + " n_k=" + std::to_string(n_k) +
                                 " window=" + std::to_string(window) + " pct=" + std::to_string(rule.pct));
                    EXPECT_EQ(decode_token_budget(rule, tile, n_k, w),
                              reference::decode_token_budget(rule, tile, n_k, w));
                    EXPECT_EQ(decode_tile_budget(rule, tile, n_k, w),
                              reference::decode_tile_budget(rule, tile, n_k, w));
                    if (w == 0) {
                        // Without a window the decode budget is the last prefill row's.
                        const int q_tile = (n_k - 1) / tile;
                        EXPECT_EQ(decode_token_budget(rule, tile, n_k), topk_token_budget(rule, q_tile, tile, n_k));
                        EXPECT_EQ(decode_tile_budget(rule, tile, n_k), topk_tile_budget(rule, q_tile, tile, n_k));
                    }
                }
            }
        }
    }
}

TEST(DecodeScoring, TokenAndTileMassMatchReference) {
    DecodeScoringScratch scratch;  // reused across cases, as across decode steps
    for (const DecodeCase& c : decode_cases()) {
        SCOPED_TRACE(c.name("decode_mass"));
        const auto in = c.inputs(11);
        for (bool pre : {false, true}) {
            SCOPED_TRACE(pre ? "pre_softmax" : "post_softmax");
            const Pooling pooling = pre ? Pooling::PreSoftmax : Pooling::PostSoftmax;
            TokenMass mass;
            decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &mass);
            const std::vector<double> ref =
                reference::decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pre);
            ASSERT_EQ(mass.n_q_tiles, 1);
            ASSERT_EQ(mass.n_keys, c.n_k);
            ASSERT_EQ(mass.mass.size(), ref.size());
            EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref.data(), ref.size()),
                      pre ? 1e-4 : kAttentionTolerance);
            // The fused pooling + top-k: the same mass, and the top-k of it.
            const TopKRule rule{.tiles = 0, .pct = 20, .k_min_tokens = 16};
            TokenMass fused_mass;
            TokenSelection fused, separate;
            decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &fused_mass, &rule,
                              &fused);
            EXPECT_EQ(fused_mass.mass, mass.mass);
            select_decode_tokens(mass, rule, &scratch, &separate);
            EXPECT_EQ(fused.count, separate.count);
            for (int h = 0; h < c.n_kv_heads; ++h)
                EXPECT_EQ(std::vector<int32_t>(fused.list(h, 0), fused.list(h, 0) + fused.size(h, 0)),
                          std::vector<int32_t>(separate.list(h, 0), separate.list(h, 0) + separate.size(h, 0)));

            TileMass tiles;
            decode_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &tiles);
            const std::vector<double> ref_tiles =
                reference::decode_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), pre);
            ASSERT_EQ(tiles.n_k_tiles, (c.n_k - 1) / c.tile + 1);
            ASSERT_EQ(tiles.mass.size(), ref_tiles.size());
            EXPECT_LT(reference::max_abs_diff(tiles.mass.data(), ref_tiles.data(), ref_tiles.size()),
                      pre ? 1e-4 : kAttentionTolerance);
        }
    }
}

TEST(DecodeScoring, DenseDecodeWithMassMatchesReference) {
    DecodeScoringScratch scratch;
    for (const DecodeCase& c : decode_cases()) {
        SCOPED_TRACE(c.name("dense_decode_with_mass"));
        const auto in = c.inputs(13);
        const std::vector<double> ref_out = reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
        std::vector<float> out(in.q.size());
        TokenMass mass;
        attn_dense_decode_with_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), out.data(), &scratch,
                                          &mass);
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_out.data(), out.size()), kAttentionTolerance);
        const std::vector<double> ref = reference::decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), false);
        EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref.data(), ref.size()), kAttentionTolerance);
        // With each head's top-k made in the same pass: the same output and mass, and the top-k of that mass.
        const TopKRule rule{.tiles = 0, .pct = 20, .k_min_tokens = 16};
        std::vector<float> fused_out(out.size());
        TokenMass fused_mass;
        TokenSelection fused, separate;
        attn_dense_decode_with_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), fused_out.data(),
                                          &scratch, &fused_mass, &rule, &fused);
        EXPECT_EQ(fused_out, out);
        EXPECT_EQ(fused_mass.mass, mass.mass);
        select_decode_tokens(mass, rule, &scratch, &separate);
        EXPECT_EQ(fused.count, separate.count);
        EXPECT_EQ(fused.keys, separate.keys);
        TileMass tiles;
        std::fill(out.begin(), out.end(), 0.0f);
        attn_dense_decode_with_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), out.data(), &scratch,
                                         &tiles);
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_out.data(), out.size()), kAttentionTolerance);
        const std::vector<double> ref_tiles =
            reference::decode_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), false);
        EXPECT_LT(reference::max_abs_diff(tiles.mass.data(), ref_tiles.data(), ref_tiles.size()), kAttentionTolerance);
    }
}

// One thread, two (each scores whole KV heads) and three (the (head, piece) items shared out: three threads do not
// divide the two KV heads): the same masses, selections and fused dense outputs, bit for bit.
TEST(DecodeScoring, MassDoesNotDependOnThreadCount) {
    const DecodeCase c{2, 4, 64, 3000, 16, 0};
    const auto in = c.inputs(12);
    TopKRule rule;
    rule.pct = 10;
    struct Results {
        TokenMass mass, fused_mass;
        TokenSelection selection;
        TileMass tiles;
        std::vector<float> out;
    };
    const auto run = [&](int threads) {
        const int saved = omp_get_max_threads();
        omp_set_num_threads(threads);
        DecodeScoringScratch scratch;
        Results r;
        decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), Pooling::PostSoftmax, &scratch, &r.mass, &rule,
                          &r.selection);
        r.out.resize(in.q.size());
        attn_dense_decode_with_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), r.out.data(),
                                          &scratch, &r.fused_mass);
        decode_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), Pooling::PreSoftmax, &scratch, &r.tiles);
        omp_set_num_threads(saved);
        return r;
    };
    const Results one = run(1);
    for (int threads : {2, 3}) {
        SCOPED_TRACE(threads);
        const Results r = run(threads);
        EXPECT_EQ(one.mass.mass, r.mass.mass);
        EXPECT_EQ(one.selection.keys, r.selection.keys);
        EXPECT_EQ(one.selection.count, r.selection.count);
        EXPECT_EQ(one.fused_mass.mass, r.fused_mass.mass);
        EXPECT_EQ(one.out, r.out);
        EXPECT_EQ(one.tiles.mass, r.tiles.mass);
    }
}

/// A decode mass of small integers (many ties), with a NaN among the candidates.
TokenMass tied_mass(int n_kv_heads, int n_k, int tile, int window, uint64_t seed) {
    TokenMass m;
    m.n_kv_heads = n_kv_heads;
    m.n_q_tiles = 1;
    m.n_keys = n_k;
    m.tile = tile;
    m.window = window;
    m.mass.resize(static_cast<size_t>(n_kv_heads) * n_k);
    std::mt19937_64 gen(seed);
    for (float& x : m.mass) x = static_cast<float>(std::uniform_int_distribution<int>(0, 5)(gen));
    if (n_k > 40) m.mass[n_k / 3] = std::numeric_limits<float>::quiet_NaN();
    return m;
}

TEST(DecodeScoring, TopKMatchesAFullSortWithTiesToTheLowerIndex) {
    DecodeScoringScratch scratch;
    for (int n_k : {1, 16, 17, 100, 1000}) {
        for (int tile : {1, 16}) {
            for (int window : {0, 30}) {
                for (const TopKRule& rule : {TopKRule{.tiles = 2}, TopKRule{.tiles = 0, .pct = 20, .k_min_tokens = 8},
                                             TopKRule{.tiles = 1000}}) {
                    const int w = window < n_k ? window : 0;
                    SCOPED_TRACE("n_k=" + std::to_string(n_k) + " tile=" + std::to_string(tile) +
                                 " window=" + std::to_string(w) + " tiles=" + std::to_string(rule.tiles));
                    const TokenMass mass = tied_mass(2, n_k, tile, w, n_k + tile);
                    TokenSelection sel;
                    select_decode_tokens(mass, rule, &scratch, &sel);
                    ASSERT_EQ(sel.n_q_tiles, 1);
                    const int budget = reference::decode_token_budget(rule, tile, n_k, w);
                    for (int h = 0; h < 2; ++h) {
                        // NaN ranks lowest: as a full sort with NaN replaced by -inf.
                        std::vector<float> row(mass.row(h, 0), mass.row(h, 0) + n_k);
                        for (float& x : row)
                            if (std::isnan(x)) x = -std::numeric_limits<float>::infinity();
                        const std::vector<int32_t> expected =
                            reference::top_by_sort(row.data(), reference::decode_candidate_keys(n_k, tile, w), budget);
                        EXPECT_EQ(std::vector<int32_t>(sel.list(h, 0), sel.list(h, 0) + sel.size(h, 0)), expected)
                            << "head " << h;
                    }

                    TileMass tiles;
                    tiles.n_kv_heads = 2;
                    tiles.n_q_tiles = 1;
                    tiles.n_k_tiles = (n_k - 1) / tile + 1;
                    tiles.tile = tile;
                    tiles.window = w;
                    tiles.n_keys = n_k;
                    tiles.mass.assign(mass.mass.begin(), mass.mass.begin() + 2 * tiles.n_k_tiles);
                    TileSelection tsel;
                    select_decode_tiles(tiles, rule, &scratch, &tsel);
                    const int tile_budget = reference::decode_tile_budget(rule, tile, n_k, w);
                    for (int h = 0; h < 2; ++h) {
                        std::vector<float> row(tiles.row(h, 0), tiles.row(h, 0) + tiles.n_k_tiles);
                        for (float& x : row)
                            if (std::isnan(x)) x = -std::numeric_limits<float>::infinity();
                        const std::vector<int32_t> expected = reference::top_by_sort(
                            row.data(), reference::decode_candidate_tiles(n_k, tile, w), tile_budget);
                        EXPECT_EQ(std::vector<int32_t>(tsel.list(h, 0), tsel.list(h, 0) + tsel.size(h, 0)), expected)
                            << "head " << h;
                    }
                }
            }
        }
    }
}

/// A decode selection of n_heads heads over n_cand candidates (keys or tiles before the query's tile): per head up to
/// a third of them at random, ascending, in `entries` (ignoring any window: an anchor with another window may hand them
/// over).
template <class Selection>
Selection random_decode_selection(int n_heads, int n_cand, int tile, std::vector<int32_t> Selection::*entries,
                                  std::mt19937_64& gen) {
    Selection sel;
    sel.n_kv_heads = n_heads;
    sel.n_q_tiles = 1;
    sel.tile = tile;
    sel.max_k = std::max(1, n_cand / 3);
    sel.count.assign(n_heads, 0);
    (sel.*entries).assign(static_cast<size_t>(n_heads) * sel.max_k, -1);
    for (int h = 0; h < n_heads; ++h) {
        std::vector<int32_t> cand(n_cand);
        std::iota(cand.begin(), cand.end(), 0);
        std::shuffle(cand.begin(), cand.end(), gen);
        const int k = std::min<int>(n_cand, std::uniform_int_distribution<int>(0, sel.max_k)(gen));
        std::sort(cand.begin(), cand.begin() + k);
        std::copy(cand.begin(), cand.begin() + k, sel.list(h, 0));
        sel.count[h] = k;
    }
    return sel;
}

/// Random keys before the query's tile of an n_k-key cache (random_decode_selection).
TokenSelection random_decode_keys(int n_heads, int n_k, int tile, std::mt19937_64& gen) {
    return random_decode_selection(n_heads, (n_k - 1) / tile * tile, tile, &TokenSelection::keys, gen);
}

/// Random tiles before the query's tile of an n_k-key cache (random_decode_selection).
TileSelection random_decode_tiles(int n_heads, int n_k, int tile, std::mt19937_64& gen) {
    return random_decode_selection(n_heads, (n_k - 1) / tile, tile, &TileSelection::tiles, gen);
}

TEST(TokenSparseDecode, MatchesMaskedReference) {
    std::mt19937_64 gen(5);
    for (const DecodeCase& c : decode_cases()) {
        SCOPED_TRACE(c.name("token_sparse_decode"));
        const auto in = c.inputs(21);
        // Three selection heads read through a head map.
        const TokenSelection sel = random_decode_keys(3, c.n_k, c.tile, gen);
        const std::vector<int32_t>& keys = sel.keys;
        const std::vector<int32_t>& count = sel.count;
        const int max_k = sel.max_k;
        const int32_t head_map[3] = {2, 0, 1};
        const std::vector<double> ref = reference::token_sparse_decode(
            in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), keys.data(), count.data(), max_k, head_map);
        std::vector<float> out(in.q.size());
        attn_token_sparse_decode(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), keys.data(), count.data(),
                                 max_k, head_map, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
    }
}

// A decode anchor attends its selection with the scores its scoring pass kept (no K row read again): against the
// reference over the same keys, after every scoring pass an anchor runs (post- and pre-softmax pooling, with and
// without the dense output), at both granularities, windows and GQA included.
TEST(TokenSparseDecode, AnchorFromItsKeptScoresMatchesMaskedReference) {
    std::mt19937_64 gen(6);
    DecodeScoringScratch scratch;
    for (const DecodeCase& c : decode_cases()) {
        SCOPED_TRACE(c.name("token_sparse_decode_scored"));
        const auto in = c.inputs(23);
        const TokenSelection sel = random_decode_keys(c.n_kv_heads, c.n_k, c.tile, gen);
        const std::vector<double> ref =
            reference::token_sparse_decode(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), sel.keys.data(),
                                           sel.count.data(), sel.max_k, nullptr);
        std::vector<float> out(in.q.size());
        TokenMass mass;
        for (Pooling pooling : {Pooling::PostSoftmax, Pooling::PreSoftmax}) {
            SCOPED_TRACE(mode_name(pooling));
            decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &mass);
            std::fill(out.begin(), out.end(), 0.0f);
            attn_token_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), sel, out.data());
            EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        }
        std::vector<float> dense(in.q.size());
        attn_dense_decode_with_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), dense.data(),
                                          &scratch, &mass);
        std::fill(out.begin(), out.end(), 0.0f);
        attn_token_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), sel, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);

        const TileSelection tiles = random_decode_tiles(c.n_kv_heads, c.n_k, c.tile, gen);
        const std::vector<double> ref_tiles =
            reference::sparse_decode(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), tiles.tiles.data(),
                                     tiles.count.data(), tiles.max_k, nullptr);
        TileMass tile_mass;
        for (Pooling pooling : {Pooling::PostSoftmax, Pooling::PreSoftmax}) {
            SCOPED_TRACE(std::string("tiles ") + std::string(mode_name(pooling)));
            decode_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &tile_mass);
            std::fill(out.begin(), out.end(), 0.0f);
            attn_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), tiles, out.data());
            EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kAttentionTolerance);
        }
        attn_dense_decode_with_tile_mass(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), dense.data(),
                                         &scratch, &tile_mass);
        std::fill(out.begin(), out.end(), 0.0f);
        attn_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), tiles, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kAttentionTolerance);
    }
}

// An anchor's pass given a rule makes the selection and gathers, per head while its rows are in cache, the scores of
// the list its attention reads: the same output, bit for bit, as the scores read back from the rows a pass without a
// rule keeps (the same floats in the same order), and the masked reference's.
TEST(TokenSparseDecode, AnchorFromItsGatheredScoresMatchesRowsAndReference) {
    DecodeScoringScratch scratch;
    const TopKRule rule{.tiles = 0, .pct = 20, .k_min_tokens = 16};
    for (const DecodeCase& c : decode_cases()) {
        SCOPED_TRACE(c.name("token_sparse_decode_gathered_scores"));
        const auto in = c.inputs(29);
        for (Pooling pooling : {Pooling::PostSoftmax, Pooling::PreSoftmax}) {
            SCOPED_TRACE(mode_name(pooling));
            TokenMass mass;
            TokenSelection sel;
            decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &mass, &rule, &sel);
            EXPECT_GT(scratch.listed_ld, 0);
            std::vector<float> gathered(in.q.size());
            attn_token_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), sel, gathered.data());

            decode_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), pooling, &scratch, &mass);
            EXPECT_EQ(scratch.listed_ld, 0);
            EXPECT_TRUE(scratch.scored.rows_kept);
            std::vector<float> from_rows(in.q.size());
            attn_token_sparse_decode_scored(in.shape, c.tile, scratch, in.v.data(), sel, from_rows.data());
            EXPECT_EQ(gathered, from_rows);

            const std::vector<double> ref =
                reference::token_sparse_decode(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), sel.keys.data(),
                                               sel.count.data(), sel.max_k, nullptr);
            EXPECT_LT(reference::max_abs_diff(gathered.data(), ref.data(), ref.size()), kAttentionTolerance);
        }
    }
}

TEST(TokenSparseDecode, EveryKeySelectedEqualsDense) {
    for (int n_k : {1, 16, 17, 1000, 4097}) {
        SCOPED_TRACE("token_sparse_decode_all(n_k=" + std::to_string(n_k) + ",hq=8,hkv=2,d=64,tile=16)");
        const auto in = reference::random_inputs(8, 2, 64, 1, n_k, 31);
        const int own = (n_k - 1) / 16 * 16;
        std::vector<int32_t> keys, count(2, own);
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < std::max(1, own); ++j) keys.push_back(j);
        const std::vector<double> ref = reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
        std::vector<float> out(in.q.size());
        attn_token_sparse_decode(in.shape, 16, in.q.data(), in.k.data(), in.v.data(), keys.data(), count.data(),
                                 std::max(1, own), nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
    }
}

/// Integer queries and keys in [-3, 3]: every page bound and page score is exact in float, so the chosen pages can
/// be compared exactly.
reference::AttnInputs integer_inputs(int n_kv_heads, int group, int head_dim, int n_k, uint64_t seed) {
    auto in = reference::random_inputs(n_kv_heads * group, n_kv_heads, head_dim, 1, n_k, seed);
    for (float& x : in.q) x = std::round(x * 1.5f);
    for (int h = 0; h < n_kv_heads; ++h)
        for (int j = 0; j < n_k; ++j)
            for (int p = 0; p < head_dim; ++p) {
                float& x = in.k[(static_cast<size_t>(h) * in.shape.kv_stride + j) * head_dim + p];
                x = std::round(x * 1.5f);
            }
    return in;
}

TEST(Quest, PageBoundsScoresAndChosenPagesEqualBruteForce) {
    DecodeScoringScratch scratch;
    for (int page : {1, 4, 16}) {
        for (int n_k : {1, 5, 16, 17, 90}) {
            for (int window : {0, 23}) {
                const int w = window < n_k ? window : 0;
                SCOPED_TRACE("quest(page=" + std::to_string(page) + ",n_k=" + std::to_string(n_k) +
                             ",window=" + std::to_string(w) + ",hq=6,hkv=2,d=8)");
                auto in = integer_inputs(2, 3, 8, n_k, page * 100 + n_k);
                in.shape.window = w;
                const AttnShape& s = in.shape;
                // Bounds built the way the KV cache builds them: the keys arrive in chunks of 1, 2, 3, ... rows.
                const int n_pages = tile_count(n_k, page);
                std::vector<float> lo(static_cast<size_t>(2) * n_pages * 8), hi(lo.size());
                for (int h = 0; h < 2; ++h) {
                    int chunk = 1;
                    for (int pos = 0; pos < n_k;) {
                        const int end = std::min({n_k, pos + chunk, (pos / page + 1) * page});
                        const size_t at = (static_cast<size_t>(h) * n_pages + pos / page) * 8;
                        key_page_bounds_add(in.k.data() + (static_cast<size_t>(h) * s.kv_stride + pos) * 8, end - pos,
                                            8, pos % page == 0, lo.data() + at, hi.data() + at);
                        pos = end;
                        ++chunk;
                    }
                    const std::vector<float> ref_lo = reference::page_min(s, in.k.data(), h, page);
                    const std::vector<float> ref_hi = reference::page_max(s, in.k.data(), h, page);
                    EXPECT_TRUE(std::equal(ref_lo.begin(), ref_lo.end(), lo.begin() + h * n_pages * 8));
                    EXPECT_TRUE(std::equal(ref_hi.begin(), ref_hi.end(), hi.begin() + h * n_pages * 8));
                }
                const KeyPageBounds bounds{page, n_pages, lo.data(), hi.data()};
                TileMass scores;
                quest_page_scores(s, in.q.data(), bounds, &scores);
                const std::vector<double> ref = reference::quest_page_scores(s, in.q.data(), in.k.data(), page);
                ASSERT_EQ(scores.mass.size(), ref.size());
                EXPECT_EQ(reference::max_abs_diff(scores.mass.data(), ref.data(), ref.size()), 0.0);
                // The bound really bounds: every candidate key's q.k summed over the group is at most its page's
                // score.
                for (int h = 0; h < 2; ++h) {
                    for (int j : reference::decode_candidate_keys(n_k, page, w)) {
                        double dot = 0;
                        for (int g = 0; g < 3; ++g)
                            for (int p = 0; p < 8; ++p)
                                dot += in.q[(h * 3 + g) * 8 + p] *
                                       in.k[(static_cast<size_t>(h) * s.kv_stride + j) * 8 + p];
                        EXPECT_LE(dot, ref[static_cast<size_t>(h) * scores.n_k_tiles + j / page]);
                    }
                }
                const TopKRule rule{.tiles = 2};
                TileSelection sel;
                select_decode_tiles(scores, rule, &scratch, &sel);
                const int budget = reference::decode_tile_budget(rule, page, n_k, w);
                for (int h = 0; h < 2; ++h) {
                    std::vector<float> row(ref.begin() + h * scores.n_k_tiles,
                                           ref.begin() + (h + 1) * scores.n_k_tiles);
                    EXPECT_EQ(
                        std::vector<int32_t>(sel.list(h, 0), sel.list(h, 0) + sel.size(h, 0)),
                        reference::top_by_sort(row.data(), reference::decode_candidate_tiles(n_k, page, w), budget))
                        << "head " << h;
                }
            }
        }
    }
}

}  // namespace
}  // namespace kascade
