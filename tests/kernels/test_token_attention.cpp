// tests/kernels/test_token_attention.cpp: token-level (the paper's) Kascade kernels against the double-precision
// references: gathered sparse prefill over random key selections (own layer and through a KV-head map, with and
// without a sliding window), every key selected (= dense), token pooling (post-softmax mass and pre-softmax max), and
// thread invariance.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/attention_tolerance.h"
#include "kernels/dense_attention.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

// A random ascending key selection per (KV head, query tile) with up to max_k keys before the tile; max_k < 0 selects
// every key before it.
TokenSelection random_token_selection(int n_kv_heads, int n_q, int tile, int max_k, uint64_t seed) {
    TokenSelection sel;
    sel.n_kv_heads = n_kv_heads;
    sel.n_q_tiles = tile_count(n_q, tile);
    sel.tile = tile;
    sel.max_k = max_k < 0 ? std::max(0, (sel.n_q_tiles - 1) * tile) : max_k;
    sel.count.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles, 0);
    sel.keys.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles * sel.max_k, -1);
    std::mt19937_64 gen(seed);
    for (int h = 0; h < n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            std::vector<int32_t> cand(qt * tile);
            std::iota(cand.begin(), cand.end(), 0);
            int k = static_cast<int>(cand.size());
            if (max_k >= 0) {
                std::shuffle(cand.begin(), cand.end(), gen);
                k = std::min<int>(k, std::uniform_int_distribution<int>(0, max_k)(gen));
                std::sort(cand.begin(), cand.begin() + k);
            }
            std::copy(cand.begin(), cand.begin() + k, sel.list(h, qt));
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = k;
        }
    }
    return sel;
}

struct TokenCase {
    int n_kv_heads, group, head_dim, t, tile, max_k, window;
    std::string name(const char* what) const {
        return std::string(what) + "(T=" + std::to_string(t) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",hkv=" + std::to_string(n_kv_heads) + ",d=" + std::to_string(head_dim) +
               ",tile=" + std::to_string(tile) + ",max_k=" + std::to_string(max_k) +
               ",window=" + std::to_string(window) + ")";
    }
};

std::vector<TokenCase> token_cases() {
    std::vector<TokenCase> cases;
    for (int d : {8, 64, 128})
        for (int group : {1, 2, 3, 4})
            for (int t : {1, 17, 67})
                for (int tile : {1, 16, 32}) cases.push_back({2, group, d, t, tile, 70, 0});
    cases.push_back({1, 1, 64, 513, 32, 150, 0});
    cases.push_back({1, 2, 128, 333, 16, 40, 0});
    cases.push_back({1, 3, 8, 257, 1, 30, 0});
    cases.push_back({1, 4, 128, 401, 32, 130, 0});
    cases.push_back({2, 2, 64, 301, 16, 60, 45});  // windows: keys outside are never attended
    cases.push_back({1, 4, 8, 129, 32, 100, 7});
    cases.push_back({1, 1, 128, 200, 1, 50, 33});
    return cases;
}

TEST(TokenSparseAttention, PrefillMatchesMaskedReference) {
    for (const TokenCase& c : token_cases()) {
        SCOPED_TRACE(c.name("token_sparse_prefill"));
        auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 81);
        in.shape.window = c.window;
        const TokenSelection own = random_token_selection(c.n_kv_heads, c.t, c.tile, c.max_k, 82);
        const TokenSelection anchor = random_token_selection(3, c.t, c.tile, c.max_k, 83);
        std::vector<int32_t> head_map(c.n_kv_heads);
        for (int h = 0; h < c.n_kv_heads; ++h) head_map[h] = (2 * h + 1) % 3;
        for (const auto& [sel, map] : {std::pair{&own, static_cast<const int32_t*>(nullptr)},
                                       std::pair{&anchor, static_cast<const int32_t*>(head_map.data())}}) {
            SCOPED_TRACE(map ? "head_map" : "own selection");
            const std::vector<double> ref =
                reference::token_sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), *sel, map);
            std::vector<float> out(in.q.size());
            attn_token_sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), *sel, map, out.data());
            EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        }
    }
}

TEST(TokenSparseAttention, EveryKeySelectedEqualsDense) {
    for (const TokenCase& c : {TokenCase{2, 3, 64, 17, 16, -1, 0}, TokenCase{1, 4, 128, 333, 32, -1, 0},
                               TokenCase{2, 1, 8, 301, 1, -1, 0}, TokenCase{1, 2, 64, 257, 16, -1, 40}}) {
        SCOPED_TRACE(c.name("token_sparse_prefill_all"));
        auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 91);
        in.shape.window = c.window;
        const TokenSelection all = random_token_selection(c.n_kv_heads, c.t, c.tile, -1, 0);
        const std::vector<double> ref = reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
        std::vector<float> sparse(in.q.size()), dense(in.q.size());
        attn_token_sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), all, nullptr, sparse.data());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), dense.data());
        EXPECT_LT(reference::max_abs_diff(sparse.data(), ref.data(), sparse.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(sparse.data(), dense.data(), sparse.size()), kAttentionTolerance);
    }
}

double max_relative_error(const TokenMass& got, const std::vector<double>& ref) {
    if (got.mass.size() != ref.size()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        if (!std::isfinite(got.mass[i])) return INFINITY;
        worst = std::max(worst, std::abs(got.mass[i] - ref[i]) / std::max(1.0, std::abs(ref[i])));
    }
    return worst;
}

TEST(TokenMass, PoolingMatchesReference) {
    for (const TokenCase& c : token_cases()) {
        if (c.t > 400) continue;  // the reference pooling is cubic in T
        SCOPED_TRACE(c.name("token_mass"));
        auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 85);
        in.shape.window = c.window;
        TokenMass post, pre;
        attn_token_mass(in.shape, c.tile, in.q.data(), in.k.data(), &post);
        token_max_score(in.shape, c.tile, in.q.data(), in.k.data(), &pre);
        EXPECT_EQ(post.n_keys, c.t);
        EXPECT_EQ(post.n_q_tiles, tile_count(c.t, c.tile));
        EXPECT_EQ(post.window, in.shape.effective_window());
        EXPECT_LT(
            max_relative_error(post, reference::token_mass_post_softmax(in.shape, c.tile, in.q.data(), in.k.data())),
            kAttentionTolerance);
        EXPECT_LT(max_relative_error(pre, reference::token_max_score(in.shape, c.tile, in.q.data(), in.k.data())),
                  kAttentionTolerance);
    }
}

TEST(TokenMass, TopKOfKernelMassMatchesReferenceSelection) {
    // The whole anchor selection path (pooling, then top-k) against the reference's, on real-valued scores: the mass
    // error (< 2e-5) is far below the gaps between distinct random masses, so the sets agree.
    auto in = reference::random_inputs(6, 2, 64, 300, 300, 87);
    TokenMass got;
    attn_token_mass(in.shape, 16, in.q.data(), in.k.data(), &got);
    const std::vector<double> ref = reference::token_mass_post_softmax(in.shape, 16, in.q.data(), in.k.data());
    TokenMass ref_mass = got;
    for (size_t i = 0; i < ref.size(); ++i) ref_mass.mass[i] = static_cast<float>(ref[i]);
    const TopKRule rule{0, 10, 32, KRule::Sequence};
    const TokenSelection a = select_topk_tokens(got, rule);
    const TokenSelection b = reference::select_topk_tokens(ref_mass, rule);
    ASSERT_EQ(a.count, b.count);
    for (int h = 0; h < a.n_kv_heads; ++h)
        for (int qt = 0; qt < a.n_q_tiles; ++qt)
            EXPECT_TRUE(std::equal(a.list(h, qt), a.list(h, qt) + a.size(h, qt), b.list(h, qt)))
                << "kv_head " << h << " q_tile " << qt;
}

TEST(TokenSparseAttention, ThreadCountDoesNotChangeResults) {
    for (int window : {0, 150}) {
        SCOPED_TRACE("window " + std::to_string(window));
        auto in = reference::random_inputs(8, 2, 64, 700, 700, 89);
        in.shape.window = window;
        const TokenSelection sel = random_token_selection(2, 700, 32, 90, 88);
        const int saved = omp_get_max_threads();
        std::vector<float> out1(in.q.size()), out2(in.q.size());
        TokenMass m1, m2, x1, x2;
        omp_set_num_threads(1);
        attn_token_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, out1.data());
        attn_token_mass(in.shape, 32, in.q.data(), in.k.data(), &m1);
        token_max_score(in.shape, 32, in.q.data(), in.k.data(), &x1);
        omp_set_num_threads(2);
        attn_token_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, out2.data());
        attn_token_mass(in.shape, 32, in.q.data(), in.k.data(), &m2);
        token_max_score(in.shape, 32, in.q.data(), in.k.data(), &x2);
        omp_set_num_threads(saved);
        EXPECT_EQ(out1, out2);
        EXPECT_EQ(m1.mass, m2.mass);
        EXPECT_EQ(x1.mass, x2.mass);
    }
}

}  // namespace
}  // namespace kascade
