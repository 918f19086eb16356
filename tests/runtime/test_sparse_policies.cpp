// tests/runtime/test_sparse_policies.cpp: the Kascade, oracle and streaming policies inside the real stories260K
// forward pass: exactness when nothing is skipped, and key counts against hand-derived budgets; with sliding windows,
// the policies on random layers against dense windowed attention and hand-derived windowed densities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/shared_files.h"
#include "io/weights/model_weights.h"
#include "kernels/decode_scoring.h"
#include "kernels/topk_tiles.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/streaming_attention.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

/// Deterministic pseudo-text: token ids that are neither all equal nor uniform noise.
std::vector<int32_t> stories_tokens_for_test(int n) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + (i / 7) * 11) % 500;
    return t;
}

AttentionSchedule five_layer_reuse_schedule(int n_layers, int n_kv_heads) {
    // 0 dense, 1 anchor, 2-3 reuse 1 (3 with a permuted head map), 4 anchor.
    AttentionSchedule s = AttentionSchedule::all_dense(n_layers);
    s.layers[1].role = LayerRole::Anchor;
    s.layers[4].role = LayerRole::Anchor;
    for (int l : {2, 3}) {
        s.layers[l].role = LayerRole::Reuse;
        s.layers[l].anchor = 1;
        s.layers[l].head_map.resize(n_kv_heads);
        for (int h = 0; h < n_kv_heads; ++h) s.layers[l].head_map[h] = l == 3 ? (h + 1) % n_kv_heads : h;
    }
    return s;
}

TEST(SparsePolicies, TopKCoveringEveryTileReproducesDensePerplexity) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const auto tokens = stories_tokens_for_test(2000);
    PerplexityOptions options;
    options.ctx = 512;
    DenseAttention dense;
    const double ppl_dense = evaluate_perplexity(model, dense, tokens, w.config.bos_token_id, options).perplexity();
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        for (int tile : {1, 16, 32}) {
            if (tile == 1 && g == KeyGranularity::Tile) continue;
            SparseAttentionOptions sparse{.tile = tile, .topk = {.tiles = 1000}, .granularity = g};
            KascadeAttention kascade(five_layer_reuse_schedule(w.config.n_layers, w.config.n_kv_heads), sparse);
            const double ppl = evaluate_perplexity(model, kascade, tokens, w.config.bos_token_id, options).perplexity();
            EXPECT_LT(std::abs(ppl - ppl_dense) / ppl_dense, 1e-6)
                << "tile " << tile << " granularity " << mode_name(g);
            for (const LayerDensity& d : kascade.layer_density()) EXPECT_EQ(d.ratio(), 1.0);
        }
    }
}

TEST(SparsePolicies, OracleAttendsExactlyTheBudget) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const int n = 300, tile = 16, k_tiles = 4;
    const auto tokens = stories_tokens_for_test(n - 1);
    PerplexityOptions options;
    options.ctx = n;
    // Per query head, row p of tile p/16 sees min(4, p/16) full earlier tiles (token granularity: min(64, 16 (p/16))
    // keys, the same count) and p%16 + 1 keys of its own tile.
    double expected = 0, causal = 0;
    for (int p = 0; p < n; ++p) {
        expected += std::min(k_tiles, p / tile) * tile + p % tile + 1;
        causal += p + 1;
    }
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        KascadeAttention oracle(AttentionSchedule::oracle(w.config.n_layers),
                                {.tile = tile, .topk = {.tiles = k_tiles}, .granularity = g});
        evaluate_perplexity(model, oracle, tokens, w.config.bos_token_id, options);
        const double heads = w.config.n_heads;
        const auto& density = oracle.layer_density();
        EXPECT_EQ(density[0].attended_keys, causal * heads);  // layer 0 dense
        for (int l = 1; l < w.config.n_layers; ++l) {
            EXPECT_EQ(density[l].attended_keys, expected * heads) << "layer " << l << " " << mode_name(g);
            EXPECT_EQ(density[l].causal_keys, causal * heads) << "layer " << l;
        }
    }
}

TEST(SparsePolicies, SparsityChangesPerplexityButStaysFinite) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const auto tokens = stories_tokens_for_test(1022);
    PerplexityOptions options;
    options.ctx = 512;
    DenseAttention dense;
    const double ppl_dense = evaluate_perplexity(model, dense, tokens, w.config.bos_token_id, options).perplexity();
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        for (Pooling pooling : {Pooling::PostSoftmax, Pooling::PreSoftmax}) {
            KascadeAttention kascade(five_layer_reuse_schedule(w.config.n_layers, w.config.n_kv_heads),
                                     {.tile = 16, .topk = {.tiles = 2}, .granularity = g, .pooling = pooling});
            const double ppl = evaluate_perplexity(model, kascade, tokens, w.config.bos_token_id, options).perplexity();
            EXPECT_TRUE(std::isfinite(ppl));
            EXPECT_NE(ppl, ppl_dense);  // 2 of up to 31 tiles: the sparse pass must not silently be the dense one
            EXPECT_LT(kascade.layer_density()[2].ratio(), 0.5);
        }
    }
}

TEST(SparsePolicies, StreamingSelectionIsSinkPlusRecentWindow) {
    const TileSelection s = streaming_selection(100, 16, {.tiles = 3});
    ASSERT_EQ(s.n_q_tiles, 7);
    auto tiles_of = [&](int qt) { return std::vector<int32_t>(s.list(0, qt), s.list(0, qt) + s.size(0, qt)); };
    EXPECT_EQ(tiles_of(0), (std::vector<int32_t>{}));
    EXPECT_EQ(tiles_of(1), (std::vector<int32_t>{0}));
    EXPECT_EQ(tiles_of(2), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(tiles_of(3), (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(tiles_of(4), (std::vector<int32_t>{0, 2, 3}));
    EXPECT_EQ(tiles_of(6), (std::vector<int32_t>{0, 4, 5}));
}

TEST(SparsePolicies, PooledHeadsSelectFromTheSummedMassForEveryHead) {
    TileMass mass;
    mass.n_kv_heads = 2;
    mass.n_q_tiles = mass.n_k_tiles = 4;
    mass.tile = 16;
    mass.mass.assign(2 * 4 * 4, 0.0f);
    const float head0[] = {5, 0, 1}, head1[] = {0, 4, 3};  // query tile 3, candidate tiles 0..2
    std::copy(head0, head0 + 3, mass.row(0, 3));
    std::copy(head1, head1 + 3, mass.row(1, 3));
    mass.n_keys = 64;
    const TileSelection own = select_layer_tiles(mass, {.tile = 16, .topk = {.tiles = 2}});
    const TileSelection pooled = select_layer_tiles(mass, {.tile = 16, .topk = {.tiles = 2}, .pooled_heads = true});
    auto tiles_of = [](const TileSelection& s, int h) {
        return std::vector<int32_t>(s.list(h, 3), s.list(h, 3) + s.size(h, 3));
    };
    EXPECT_EQ(tiles_of(own, 0), (std::vector<int32_t>{0, 2}));
    EXPECT_EQ(tiles_of(own, 1), (std::vector<int32_t>{1, 2}));
    // Summed 5, 4, 4: tile 0, then the tie between 1 and 2 goes to the lower index; the same set for both heads.
    ASSERT_EQ(pooled.n_kv_heads, 2);
    EXPECT_EQ(tiles_of(pooled, 0), (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(tiles_of(pooled, 1), (std::vector<int32_t>{0, 1}));
}

/// One layer's random inputs: q [n][hq][d], k and v [hkv][n][d], uniform in [-2, 2).
struct LayerInputs {
    AttnShape shape;
    std::vector<float> q, k, v;
};

LayerInputs random_layer(int n, int n_q_heads, int n_kv_heads, int head_dim, int window, uint64_t seed) {
    LayerInputs in;
    in.shape = {.n_q_heads = n_q_heads,
                .n_kv_heads = n_kv_heads,
                .head_dim = head_dim,
                .n_q = n,
                .n_k = n,
                .kv_stride = n,
                .scale = 1.0f / std::sqrt(static_cast<float>(head_dim)),
                .window = window};
    in.q.resize(static_cast<size_t>(n) * n_q_heads * head_dim);
    in.k.resize(static_cast<size_t>(n) * n_kv_heads * head_dim);
    in.v.resize(in.k.size());
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (auto* x : {&in.q, &in.k, &in.v})
        for (float& e : *x) e = dist(gen);
    return in;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    return std::isfinite(worst) ? worst : INFINITY;
}

// Windows per layer differ, and layer 2 reuses the tiles of anchor layer 1 chosen under a wider window.
constexpr int kWindows[] = {100, 100, 37, 100, 53};

/// Runs every layer of `policy` on its own random inputs and compares the output with dense windowed attention.
void expect_dense_windowed(AttentionPolicy& policy, int n, const char* what) {
    DenseAttention dense;
    for (int layer = 0; layer < 5; ++layer) {
        const LayerInputs in = random_layer(n, 6, 2, 64, kWindows[layer], 100 + layer);
        std::vector<float> out(in.q.size()), ref(in.q.size());
        policy.attend({layer, in.shape, in.q.data(), in.k.data(), in.v.data(), out.data(), {}});
        dense.attend({layer, in.shape, in.q.data(), in.k.data(), in.v.data(), ref.data(), {}});
        EXPECT_LT(max_abs_diff(out, ref), 2e-5) << what << " layer " << layer << " window " << kWindows[layer];
    }
}

// Decode with pooled heads: the post-softmax probabilities of the new token, summed over each GQA group, then over
// the KV heads (and over each tile's keys at tile granularity); every KV head gets the one top-k of that sum. The
// reference is computed here in double, by brute force.
TEST(SparsePolicies, PooledHeadsInDecodeSelectTheTopKOfTheSummedProbabilities) {
    constexpr int kTile = 8, kKeys = 70, kQHeads = 4, kKvHeads = 2, kDim = 16;
    const LayerInputs in = random_layer(kKeys, kQHeads, kKvHeads, kDim, 0, 7);
    AttnShape shape = in.shape;
    shape.n_q = 1;  // the query of the last position, attending to all kKeys cached keys
    const float* q = in.q.data() + static_cast<size_t>(kKeys - 1) * kQHeads * kDim;
    const int group = kQHeads / kKvHeads;
    std::vector<double> key_mass(kKeys, 0.0);  // summed over every query head
    for (int hq = 0; hq < kQHeads; ++hq) {
        const float* k_head = in.k.data() + static_cast<size_t>(hq / group) * kKeys * kDim;
        std::vector<double> score(kKeys);
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < kKeys; ++j) {
            double dot = 0;
            for (int x = 0; x < kDim; ++x) dot += static_cast<double>(q[hq * kDim + x]) * k_head[j * kDim + x];
            score[j] = dot * shape.scale;
            m = std::max(m, score[j]);
        }
        for (int j = 0; j < kKeys; ++j) sum += std::exp(score[j] - m);
        for (int j = 0; j < kKeys; ++j) key_mass[j] += std::exp(score[j] - m) / sum;
    }
    // The top `budget` of `mass` among the first `candidates` entries, ascending.
    const auto top = [](const std::vector<double>& mass, int candidates, int budget) {
        std::vector<int32_t> order(candidates);
        for (int j = 0; j < candidates; ++j) order[j] = j;
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return mass[a] > mass[b]; });
        order.resize(budget);
        std::sort(order.begin(), order.end());
        return order;
    };
    const int own_tile = (kKeys - 1) / kTile;  // candidates: the keys and tiles before the query's own tile
    const TopKRule rule{.tiles = 3};
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        SCOPED_TRACE(mode_name(g));
        std::vector<int32_t> expected;
        if (g == KeyGranularity::Token) {
            expected = top(key_mass, own_tile * kTile, decode_token_budget(rule, kTile, kKeys));
        } else {
            std::vector<double> tile_mass(own_tile, 0.0);
            for (int j = 0; j < own_tile * kTile; ++j) tile_mass[j / kTile] += key_mass[j];
            expected = top(tile_mass, own_tile, decode_tile_budget(rule, kTile, kKeys));
        }
        ASSERT_GT(expected.size(), 1u);
        const SparseAttentionOptions options{
            .tile = kTile, .topk = rule, .granularity = g, .pooling = Pooling::PostSoftmax, .pooled_heads = true};
        PoolingScratch scratch;
        LayerSelection selection;
        select_decode_keys(shape, q, in.k.data(), options, &scratch, &selection);
        for (int h = 0; h < kKvHeads; ++h) {
            const int32_t* list = g == KeyGranularity::Token ? selection.tokens.list(h, 0) : selection.tiles.list(h, 0);
            const int n = g == KeyGranularity::Token ? selection.tokens.size(h, 0) : selection.tiles.size(h, 0);
            EXPECT_EQ(std::vector<int32_t>(list, list + n), expected) << "KV head " << h;
        }
    }
}

TEST(SparsePolicies, WindowedPoliciesWithEveryCandidateEqualDenseWindowed) {
    for (int n : {129, 300}) {
        SCOPED_TRACE("T=" + std::to_string(n));
        for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
            SCOPED_TRACE(mode_name(g));
            const SparseAttentionOptions options{.tile = 16, .topk = {.tiles = 1000}, .granularity = g};
            KascadeAttention kascade(five_layer_reuse_schedule(5, 2), options);
            expect_dense_windowed(kascade, n, "kascade");
            KascadeAttention oracle(AttentionSchedule::oracle(5), options);
            expect_dense_windowed(oracle, n, "oracle");
            StreamingAttention streaming(5, options);
            expect_dense_windowed(streaming, n, "streaming");
            for (const auto* density :
                 {&kascade.layer_density(), &oracle.layer_density(), &streaming.layer_density()}) {
                for (int l = 0; l < 5; ++l) {
                    EXPECT_EQ((*density)[l].ratio(), 1.0) << "layer " << l;
                    // Rows 0..w-1 see p + 1 keys, the others w, for each of the 6 query heads.
                    const double w = kWindows[l];
                    EXPECT_EQ((*density)[l].causal_keys, 6 * (w * (w + 1) / 2 + (n - w) * w)) << "layer " << l;
                }
            }
        }
    }
}

TEST(SparsePolicies, WindowedDensityCountsOnlyKeysInsideTheWindow) {
    // 20 tokens, tiles of 8, window 5, one KV head with two query heads. Query tile 1 (rows 8..15) keeps key tile 0;
    // query tile 2 (rows 16..19) keeps key tile 0, which lies wholly outside the window of all its rows.
    const AttnShape shape{
        .n_q_heads = 2, .n_kv_heads = 1, .head_dim = 8, .n_q = 20, .n_k = 20, .kv_stride = 20, .scale = 1, .window = 5};
    TileSelection sel;
    sel.n_kv_heads = 1;
    sel.n_q_tiles = 3;
    sel.max_k = 1;
    sel.tile = 8;
    sel.count = {0, 1, 1};
    sel.tiles = {0, 0, 0};
    // Row p sees keys p-4..p. Tile 0: rows 0..7 see 1,2,3,4,5,5,5,5 = 30 of their own tile. Tile 1: rows 8..11
    // see 4,3,2,1 keys of tile 0 (= 10) and 1,2,3,4,5,5,5,5 of their own (= 30). Tile 2: nothing of tile 0, and
    // 1,2,3,4 of their own (= 10). Per query head 30 + 40 + 10 = 80 of the 1+2+3+4+16*5 = 90 windowed causal keys.
    const LayerDensity d = sparse_prefill_density(shape, 8, sel, nullptr);
    EXPECT_EQ(d.attended_keys, 2 * 80.0);
    EXPECT_EQ(d.causal_keys, 2 * 90.0);
    EXPECT_EQ(dense_prefill_density(shape).attended_keys, 2 * 90.0);
}

TEST(SparsePolicies, StreamingWithWindowMovesTheSinkBudgetToRecentTiles) {
    // 40 tokens, tiles of 8, window 12, one tile of budget. Query tile t starts at 8t; its first row reaches back to
    // key 8t - 11: tile 0 for t <= 2 (the sink), tile 1 for t = 3, tile 2 for t = 4.
    const TileSelection s = streaming_selection(40, 8, {.tiles = 1}, 12);
    ASSERT_EQ(s.n_q_tiles, 5);
    auto tiles_of = [&](int qt) { return std::vector<int32_t>(s.list(0, qt), s.list(0, qt) + s.size(0, qt)); };
    EXPECT_EQ(tiles_of(0), (std::vector<int32_t>{}));
    EXPECT_EQ(tiles_of(1), (std::vector<int32_t>{0}));
    EXPECT_EQ(tiles_of(2), (std::vector<int32_t>{0}));
    EXPECT_EQ(tiles_of(3), (std::vector<int32_t>{2}));
    EXPECT_EQ(tiles_of(4), (std::vector<int32_t>{3}));

    // Through the policy (layer 1; layer 0 is dense). Row p sees keys p-11..p. Own tile: rows see 1..8 keys (36 per
    // query tile). Selected tiles: query tile 1, rows 8..15, see 8,8,8,8,7,6,5,4 keys of tile 0 (54); query tile 2,
    // rows 16..18, see 3,2,1 keys of tile 0 (6); query tiles 3 and 4 see 8,8,8,8,7,6,5,4 of tiles 2 and 3 (54 each).
    // Per query head 5 * 36 + 54 + 6 + 54 + 54 = 348, of 1+..+12 + 28 * 12 = 414 windowed causal keys.
    StreamingAttention streaming(2, {.tile = 8, .topk = {.tiles = 1}, .granularity = KeyGranularity::Tile});
    const LayerInputs in = random_layer(40, 4, 2, 8, 12, 7);
    std::vector<float> out(in.q.size());
    streaming.attend({1, in.shape, in.q.data(), in.k.data(), in.v.data(), out.data(), {}});
    EXPECT_EQ(streaming.layer_density()[1].attended_keys, 4 * 348.0);
    EXPECT_EQ(streaming.layer_density()[1].causal_keys, 4 * 414.0);
}

}  // namespace
