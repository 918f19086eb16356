// tests/runtime/test_decode_policies.cpp: the sparse decode policies (Kascade with reuse, oracle, streaming, Quest)
// inside the real forward pass, one generated token at a time after a dense prefill (teacher forcing):
//   - with a budget covering every key each equals dense decode (NLL of the decoded tokens), on stories260K and on a
//     random-weight GQA model with a sliding window, and its density is exactly 1 against hand-counted causal keys;
//   - with a small budget the keys attended per step equal a hand derivation;
//   - every decode call's output equals the double reference of kernels/reference over the keys the policy kept, the
//     keys kept are a top-k of the reference's ranking, and Quest's page bounds in the KV cache equal brute force;
//   - calls of any other shape, and Quest without a paged cache, are rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "common/shared_files.h"
#include "common/temp_dir.h"
#include "io/weights/model_weights.h"
#include "kernels/reference/attention_reference.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/quest_attention.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/runtime/transformer.h"
#include "reference/random_checkpoint.h"
#include "teacher_forced_decode.h"

namespace fs = std::filesystem;
using namespace kascade;
using kascade::test::decode_causal_keys;
using kascade::test::small_windowed_gqa_config;
using kascade::test::teacher_forced_decode_nll;
using kascade::test::tokens_for_test;

namespace {

AttentionSchedule oracle_reuse_schedule(int n_layers, int n_kv_heads) {
    // 0 dense, 1 anchor, 2-3 reuse 1 (3 with a permuted head map), 4.. anchors.
    AttentionSchedule s = AttentionSchedule::oracle(n_layers);
    for (int l : {2, 3}) {
        if (l >= n_layers) continue;
        s.layers[l].role = LayerRole::Reuse;
        s.layers[l].anchor = 1;
        s.layers[l].head_map.resize(n_kv_heads);
        for (int h = 0; h < n_kv_heads; ++h) s.layers[l].head_map[h] = l == 3 ? (h + 1) % n_kv_heads : h;
    }
    return s;
}

/// A policy under test with its density.
struct NamedPolicy {
    std::string name;
    std::unique_ptr<AttentionPolicy> policy;
    std::function<const std::vector<LayerDensity>&()> density;
};

template <typename Policy>
NamedPolicy named(std::string name, std::unique_ptr<Policy> p) {
    Policy* raw = p.get();
    return {std::move(name), std::move(p),
            [raw]() -> const std::vector<LayerDensity>& { return raw->layer_density(); }};
}

/// Every decode policy with the given options (Quest with page = options.tile and the same rule).
std::vector<NamedPolicy> decode_policies(const ModelConfig& c, const SparseAttentionOptions& options) {
    std::vector<NamedPolicy> out;
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        SparseAttentionOptions o = options;
        o.granularity = g;
        const std::string suffix = "/" + std::string(mode_name(g));
        out.push_back(named("kascade" + suffix,
                            std::make_unique<KascadeAttention>(oracle_reuse_schedule(c.n_layers, c.n_kv_heads), o)));
        out.push_back(
            named("oracle" + suffix, std::make_unique<KascadeAttention>(AttentionSchedule::oracle(c.n_layers), o)));
        out.push_back(named("streaming" + suffix, std::make_unique<StreamingAttention>(c.n_layers, o)));
    }
    SparseAttentionOptions pre = options;
    pre.pooling = Pooling::PreSoftmax;
    out.push_back(named("kascade/pre_softmax",
                        std::make_unique<KascadeAttention>(oracle_reuse_schedule(c.n_layers, c.n_kv_heads), pre)));
    out.push_back(named("quest", std::make_unique<QuestAttention>(
                                     c.n_layers, QuestOptions{.page = options.tile, .topk = options.topk})));
    return out;
}

void expect_full_budget_policies_equal_dense(const Transformer& model, const std::vector<int32_t>& tokens, int prompt,
                                             int tile) {
    const ModelConfig& c = model.config();
    DenseAttention dense;
    const double nll_dense = teacher_forced_decode_nll(model, dense, tokens, prompt);
    const int steps = static_cast<int>(tokens.size()) - 1 - prompt;
    for (NamedPolicy& p : decode_policies(c, {.tile = tile, .topk = {.tiles = 1000}})) {
        const double nll = teacher_forced_decode_nll(model, *p.policy, tokens, prompt);
        EXPECT_LT(std::abs(nll - nll_dense) / nll_dense, 1e-6) << p.name << ": " << nll << " vs " << nll_dense;
        for (int l = 0; l < c.n_layers; ++l) {
            const LayerDensity& d = p.density()[l];
            EXPECT_EQ(d.ratio(), 1.0) << p.name << " layer " << l;
            EXPECT_EQ(d.causal_keys, c.n_heads * decode_causal_keys(prompt, steps, c.window(l)))
                << p.name << " layer " << l;
        }
    }
}

TEST(DecodePolicies, FullBudgetEqualsDenseDecodeOnStories260K) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const auto tokens = tokens_for_test(150, w.config.vocab_size);
    for (int tile : {1, 16}) {
        SCOPED_TRACE("tile " + std::to_string(tile));
        expect_full_budget_policies_equal_dense(model, tokens, 100, tile);
    }
}

TEST(DecodePolicies, FullBudgetEqualsDenseDecodeOnAWindowedGqaModel) {
    test::TempDir dir("decode-window");
    naive::write_random_checkpoint(small_windowed_gqa_config(12), dir.path(), 51);
    const ModelWeights w = load_model(dir.path());
    ASSERT_EQ(w.config.layer_window, std::vector<int>(5, 12));
    const Transformer model(w);
    const auto tokens = tokens_for_test(70, w.config.vocab_size);
    for (int tile : {1, 4, 5}) {
        SCOPED_TRACE("tile " + std::to_string(tile));
        expect_full_budget_policies_equal_dense(model, tokens, 40, tile);
    }
}

TEST(DecodePolicies, KeysPerStepEqualTheHandDerivedBudget) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const ModelConfig& c = w.config;
    const int prompt = 100, steps = 20;
    const auto tokens = tokens_for_test(prompt + steps + 1, c.vocab_size);
    // Tile 16, two tiles of budget: the query at position p = n_k - 1 attends 32 chosen keys (there are always more
    // than 32 candidates here) plus its own tile's p % 16 + 1 keys, per query head. Quest: two pages of 16, and its
    // own.
    double sparse = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) sparse += 32 + (n_k - 1) % 16 + 1;
    const double causal = decode_causal_keys(prompt, steps, 0);
    DenseAttention dense;
    const double nll_dense = teacher_forced_decode_nll(model, dense, tokens, prompt);
    for (NamedPolicy& p : decode_policies(c, {.tile = 16, .topk = {.tiles = 2}})) {
        // 32 of ~100 keys: the sparse path must not silently be the dense one.
        EXPECT_NE(teacher_forced_decode_nll(model, *p.policy, tokens, prompt), nll_dense) << p.name;
        const int dense_layers = p.name == "quest" ? 2 : 1;
        for (int l = 0; l < c.n_layers; ++l) {
            const LayerDensity& d = p.density()[l];
            EXPECT_EQ(d.causal_keys, c.n_heads * causal) << p.name << " layer " << l;
            EXPECT_EQ(d.attended_keys, c.n_heads * (l < dense_layers ? causal : sparse)) << p.name << " layer " << l;
        }
    }

    // The paper's rule: k = min(max(k_min, floor(pct% * n_k)), n_k) - tile keys (the Sequence rule), here 20 % with a
    // floor of 16: n_k = 101 .. 120 give floor(0.2 n_k) = 20 .. 24, so k = 4 .. 8 keys (whole tiles: 1 tile of 16).
    double token_keys = 0, tile_keys = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) {
        const int own = (n_k - 1) % 16 + 1;
        token_keys += n_k / 5 - 16 + own;
        tile_keys += 16 + own;
    }
    const TopKRule pct{.tiles = 0, .pct = 20, .k_min_tokens = 16};
    for (KeyGranularity g : {KeyGranularity::Token, KeyGranularity::Tile}) {
        KascadeAttention oracle(AttentionSchedule::oracle(c.n_layers), {.tile = 16, .topk = pct, .granularity = g});
        teacher_forced_decode_nll(model, oracle, tokens, prompt);
        const double expected = g == KeyGranularity::Token ? token_keys : tile_keys;
        for (int l = 1; l < c.n_layers; ++l)
            EXPECT_EQ(oracle.layer_density()[l].attended_keys, c.n_heads * expected) << mode_name(g) << " layer " << l;
    }
}

TEST(DecodePolicies, WindowedKeysPerStepEqualTheHandDerivedBudget) {
    test::TempDir dir("decode-window-count");
    naive::write_random_checkpoint(small_windowed_gqa_config(12), dir.path(), 52);
    const ModelWeights w = load_model(dir.path());
    const Transformer model(w);
    const int prompt = 40, steps = 10;
    const auto tokens = tokens_for_test(prompt + steps + 1, w.config.vocab_size);
    // Window 12, tile 4, one tile (4 keys) of budget. The query at p = n_k - 1 sees keys p-11 .. p: its own tile's
    // p % 4 + 1 keys and 11 - p % 4 candidates before it, always more than 4: 4 + p % 4 + 1 keys per query head.
    // Streaming has no sink (key 0 is outside every window here): the 4 keys before the tile.
    double expected = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) expected += 4 + (n_k - 1) % 4 + 1;
    const double causal = decode_causal_keys(prompt, steps, 12);
    const SparseAttentionOptions options{.tile = 4, .topk = {.tiles = 1}};
    for (NamedPolicy& p : decode_policies(w.config, options)) {
        // Whole tiles (and pages) chosen by score may be cut by the window: only streaming's recent tiles are known.
        if (p.name == "quest" || p.name == "kascade/tile" || p.name == "oracle/tile") continue;
        teacher_forced_decode_nll(model, *p.policy, tokens, prompt);
        for (int l = 1; l < w.config.n_layers; ++l) {
            EXPECT_EQ(p.density()[l].attended_keys, 4 * expected) << p.name << " layer " << l;
            EXPECT_EQ(p.density()[l].causal_keys, 4 * causal) << p.name << " layer " << l;
        }
    }
    // Quest with three pages of 4: the window's candidate pages are at most three (p - 11 .. p - p % 4 - 1 spans
    // 11 - p % 4 keys), so it attends every key of the window.
    QuestAttention quest(w.config.n_layers, {.page = 4, .topk = {.tiles = 3}});
    teacher_forced_decode_nll(model, quest, tokens, prompt);
    for (int l = 2; l < w.config.n_layers; ++l) EXPECT_EQ(quest.layer_density()[l].ratio(), 1.0) << "layer " << l;
}

/// Forwards every call to `inner`, then lets `check` look at the call and its output.
class CheckedPolicy : public AttentionPolicy {
  public:
    CheckedPolicy(AttentionPolicy& inner, std::function<void(const AttentionCall&)> check)
        : inner_(inner), check_(std::move(check)) {}
    void attend(const AttentionCall& call) override {
        inner_.attend(call);
        if (call.shape.n_q == 1) check_(call);
    }
    RunLayerRole layer_role(int layer) const override { return inner_.layer_role(layer); }
    int kv_page_size() const override { return inner_.kv_page_size(); }

  private:
    AttentionPolicy& inner_;
    std::function<void(const AttentionCall&)> check_;
};

/// The chosen ids are a top-`budget` of `score` over `candidates` up to `slack`: no unchosen candidate scores more
/// than slack above a chosen one.
void expect_top_k(const std::vector<int32_t>& chosen, const std::vector<int>& candidates, int budget,
                  const std::function<double(int)>& score, double slack, const std::string& what) {
    ASSERT_EQ(static_cast<int>(chosen.size()), budget) << what;
    double worst_chosen = INFINITY, best_other = -INFINITY;
    for (int x : candidates) {
        if (std::find(chosen.begin(), chosen.end(), x) != chosen.end()) {
            worst_chosen = std::min(worst_chosen, score(x));
        } else {
            best_other = std::max(best_other, score(x));
        }
    }
    EXPECT_LE(best_other, worst_chosen + slack) << what;
}

TEST(DecodePolicies, DecodeThroughTheCacheEqualsTheReference) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const ModelConfig& c = w.config;
    const int prompt = 90, steps = 6;
    const auto tokens = tokens_for_test(prompt + steps + 1, c.vocab_size);
    const TopKRule rule{.tiles = 0, .pct = 25, .k_min_tokens = 16};
    int checked = 0;

    // Kascade at token granularity: anchors 1 and 4, reuse layers 2 and 3 through head maps.
    const SparseAttentionOptions options{.tile = 16, .topk = rule};
    KascadeAttention kascade(oracle_reuse_schedule(c.n_layers, c.n_kv_heads), options);
    const AttentionSchedule schedule = oracle_reuse_schedule(c.n_layers, c.n_kv_heads);
    CheckedPolicy checked_kascade(kascade, [&](const AttentionCall& call) {
        const AttnShape& s = call.shape;
        const LayerPlan& plan = schedule.layers[call.layer];
        if (plan.role == LayerRole::Dense) return;
        const int source = plan.role == LayerRole::Reuse ? plan.anchor : call.layer;
        const TokenSelection& sel = kascade.selection(source).tokens;
        ASSERT_EQ(sel.n_q_tiles, 1);
        const int32_t* head_map = plan.role == LayerRole::Reuse ? plan.head_map.data() : nullptr;
        const std::vector<double> ref = reference::token_sparse_decode(
            s, 16, call.q, call.k.f32(), call.v.f32(), sel.keys.data(), sel.count.data(), sel.max_k, head_map);
        const std::string what = "layer " + std::to_string(call.layer) + " n_k " + std::to_string(s.n_k);
        EXPECT_LT(reference::max_abs_diff(call.out, ref.data(), ref.size()), 2e-5) << what;
        if (plan.role == LayerRole::Anchor) {
            const std::vector<double> mass = reference::decode_token_mass(s, 16, call.q, call.k.f32(), false);
            const int budget = reference::decode_token_budget(rule, 16, s.n_k);
            for (int h = 0; h < s.n_kv_heads; ++h) {
                expect_top_k(
                    std::vector<int32_t>(sel.list(h, 0), sel.list(h, 0) + sel.size(h, 0)),
                    reference::decode_candidate_keys(s.n_k, 16, 0), budget,
                    [&](int j) { return mass[static_cast<size_t>(h) * s.n_k + j]; }, 1e-6, what);
            }
        }
        ++checked;
    });
    teacher_forced_decode_nll(model, checked_kascade, tokens, prompt);
    EXPECT_EQ(checked, steps * (c.n_layers - 1));

    // Quest, pages of 8: the cache's page bounds against brute force, the chosen pages against the reference page
    // scores, the output against the reference over those pages.
    checked = 0;
    QuestAttention quest(c.n_layers, {.page = 8, .topk = rule});
    CheckedPolicy checked_quest(quest, [&](const AttentionCall& call) {
        const AttnShape& s = call.shape;
        const std::string what = "layer " + std::to_string(call.layer) + " n_k " + std::to_string(s.n_k);
        ASSERT_EQ(call.pages.page, 8);
        for (int h = 0; h < s.n_kv_heads; ++h) {
            const std::vector<float> lo = reference::page_min(s, call.k.f32(), h, 8),
                                     hi = reference::page_max(s, call.k.f32(), h, 8);
            const size_t at = static_cast<size_t>(h) * call.pages.page_stride * s.head_dim;
            EXPECT_TRUE(std::equal(lo.begin(), lo.end(), call.pages.min + at)) << what << " head " << h;
            EXPECT_TRUE(std::equal(hi.begin(), hi.end(), call.pages.max + at)) << what << " head " << h;
        }
        if (call.layer < 2) return;
        const TileSelection& sel = quest.selection(call.layer);
        const std::vector<double> scores = reference::quest_page_scores(s, call.q, call.k.f32(), 8);
        const int n_pages = (s.n_k - 1) / 8 + 1;
        for (int h = 0; h < s.n_kv_heads; ++h) {
            expect_top_k(
                std::vector<int32_t>(sel.list(h, 0), sel.list(h, 0) + sel.size(h, 0)),
                reference::decode_candidate_tiles(s.n_k, 8, 0), reference::decode_tile_budget(rule, 8, s.n_k),
                [&](int x) { return scores[static_cast<size_t>(h) * n_pages + x]; }, 1e-4, what);
        }
        const std::vector<double> ref = reference::sparse_decode(
            s, 8, call.q, call.k.f32(), call.v.f32(), sel.tiles.data(), sel.count.data(), sel.max_k, nullptr);
        EXPECT_LT(reference::max_abs_diff(call.out, ref.data(), ref.size()), 2e-5) << what;
        ++checked;
    });
    teacher_forced_decode_nll(model, checked_quest, tokens, prompt);
    EXPECT_EQ(checked, steps * (c.n_layers - 2));
}

TEST(DecodePolicies, CachePageBoundsFollowWritesAndTruncation) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const ModelConfig& c = w.config;
    const auto tokens = tokens_for_test(60, c.vocab_size);
    KvCache cache(c, 60, 16);
    DenseAttention dense;
    std::vector<float> hidden(60 * c.dim);
    const auto expect_exact = [&](const std::string& what) {
        AttnShape s{.n_q_heads = c.n_heads,
                    .n_kv_heads = c.n_kv_heads,
                    .head_dim = c.head_dim,
                    .n_q = 1,
                    .n_k = cache.length(),
                    .kv_stride = cache.capacity(),
                    .scale = 1};
        for (int l = 0; l < c.n_layers; ++l) {
            const KeyPageBounds b = cache.page_bounds(l);
            for (int h = 0; h < c.n_kv_heads; ++h) {
                const std::vector<float> lo = reference::page_min(s, cache.keys(l).f32(), h, 16);
                const std::vector<float> hi = reference::page_max(s, cache.keys(l).f32(), h, 16);
                const size_t at = static_cast<size_t>(h) * b.page_stride * c.head_dim;
                EXPECT_TRUE(std::equal(lo.begin(), lo.end(), b.min + at)) << what << " layer " << l;
                EXPECT_TRUE(std::equal(hi.begin(), hi.end(), b.max + at)) << what << " layer " << l;
            }
        }
    };
    model.forward(std::span(tokens).first(37), cache, dense, hidden.data());
    expect_exact("prefill 37");
    model.forward(std::span(tokens).subspan(37, 1), cache, dense, hidden.data());
    expect_exact("decode to 38");
    cache.truncate(35);  // page 2 (keys 32..47) loses keys 35..37: rebuilt from 32..34
    expect_exact("truncated to 35");
    model.forward(std::span(tokens).subspan(40, 20), cache, dense, hidden.data());
    expect_exact("prefill chunk to 55");
}

TEST(DecodePolicies, OtherShapesAndQuestWithoutPagesAreRejected) {
    const AttnShape chunk{
        .n_q_heads = 2, .n_kv_heads = 1, .head_dim = 8, .n_q = 2, .n_k = 5, .kv_stride = 5, .scale = 1};
    std::vector<float> q(2 * 2 * 8, 0.5f), kv(5 * 8, 0.25f), out(q.size());
    const AttentionCall call{1, chunk, q.data(), kv.data(), kv.data(), out.data(), {}};
    KascadeAttention kascade(AttentionSchedule::oracle(2), {.topk = {.tiles = 1}});
    StreamingAttention streaming(2, {.topk = {.tiles = 1}});
    QuestAttention quest(2, {.page = 4, .topk = {.tiles = 1}, .dense_layers = 1});
    EXPECT_THROW(kascade.attend(call), Error);
    EXPECT_THROW(streaming.attend(call), Error);
    EXPECT_THROW(quest.attend(call), Error);
    AttentionCall decode = call;
    decode.shape.n_q = 1;
    EXPECT_THROW(quest.attend(decode), Error);  // no page bounds
    EXPECT_EQ(quest.kv_page_size(), 4);
    EXPECT_EQ(DenseAttention().kv_page_size(), 0);
}

}  // namespace
