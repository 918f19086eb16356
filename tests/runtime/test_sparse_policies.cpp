// tests/runtime/test_sparse_policies.cpp: the Kascade, oracle and streaming policies inside the real stories260K
// forward pass: exactness when nothing is skipped, and key counts against hand-derived budgets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "io/weights/model_weights.h"
#include "kernels/topk_tiles.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/streaming_attention.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

const fs::path kModel = fs::path(KASCADE_SHARED_DIR) / "models/stories260K/stories260K.bin";

/// Deterministic pseudo-text: token ids that are neither all equal nor uniform noise.
std::vector<int32_t> tokens_for_test(int n) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + (i / 7) * 11) % 500;
    return t;
}

AttentionSchedule reuse_schedule(int n_layers, int n_kv_heads) {
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
    const ModelWeights w = load_model(kModel);
    const Transformer model(w);
    const auto tokens = tokens_for_test(2000);
    PerplexityOptions options;
    options.ctx = 512;
    DenseAttention dense;
    const double ppl_dense = evaluate_perplexity(model, dense, tokens, w.config.bos_token_id, options).perplexity();
    for (int tile : {16, 32}) {
        SparseAttentionOptions sparse{.tile = tile, .topk = {.tiles = 1000}};
        KascadeAttention kascade(reuse_schedule(w.config.n_layers, w.config.n_kv_heads), sparse);
        const double ppl = evaluate_perplexity(model, kascade, tokens, w.config.bos_token_id, options).perplexity();
        EXPECT_LT(std::abs(ppl - ppl_dense) / ppl_dense, 1e-6) << "tile " << tile;
        for (const LayerDensity& d : kascade.layer_density()) EXPECT_EQ(d.ratio(), 1.0);
    }
}

TEST(SparsePolicies, OracleAttendsExactlyTheBudget) {
    const ModelWeights w = load_model(kModel);
    const Transformer model(w);
    const int n = 300, tile = 16, k_tiles = 4;
    const auto tokens = tokens_for_test(n - 1);
    PerplexityOptions options;
    options.ctx = n;
    KascadeAttention oracle(AttentionSchedule::oracle(w.config.n_layers), {.tile = tile, .topk = {.tiles = k_tiles}});
    evaluate_perplexity(model, oracle, tokens, w.config.bos_token_id, options);
    // Per query head, row p of tile p/16 sees min(4, p/16) full earlier tiles and p%16 + 1 keys of its own tile.
    double expected = 0, causal = 0;
    for (int p = 0; p < n; ++p) {
        expected += std::min(k_tiles, p / tile) * tile + p % tile + 1;
        causal += p + 1;
    }
    const double heads = w.config.n_heads;
    const auto& density = oracle.layer_density();
    EXPECT_EQ(density[0].attended_keys, causal * heads);  // layer 0 dense
    for (int l = 1; l < w.config.n_layers; ++l) {
        EXPECT_EQ(density[l].attended_keys, expected * heads) << "layer " << l;
        EXPECT_EQ(density[l].causal_keys, causal * heads) << "layer " << l;
    }
}

TEST(SparsePolicies, SparsityChangesPerplexityButStaysFinite) {
    const ModelWeights w = load_model(kModel);
    const Transformer model(w);
    const auto tokens = tokens_for_test(1022);
    PerplexityOptions options;
    options.ctx = 512;
    DenseAttention dense;
    const double ppl_dense = evaluate_perplexity(model, dense, tokens, w.config.bos_token_id, options).perplexity();
    KascadeAttention kascade(reuse_schedule(w.config.n_layers, w.config.n_kv_heads),
                             {.tile = 16, .topk = {.tiles = 2}});
    const double ppl = evaluate_perplexity(model, kascade, tokens, w.config.bos_token_id, options).perplexity();
    EXPECT_TRUE(std::isfinite(ppl));
    EXPECT_NE(ppl, ppl_dense);  // 2 of up to 31 tiles: the sparse pass must not silently be the dense one
    EXPECT_LT(kascade.layer_density()[2].ratio(), 0.5);
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

}  // namespace
