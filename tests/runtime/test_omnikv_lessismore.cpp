// tests/runtime/test_omnikv_lessismore.cpp: the OmniKV and LessIsMore decode baselines.
//   - with a budget covering every key both equal dense decode (NLL of teacher-forced decode steps) on stories260K
//     and on a random-weight GQA model with a sliding window, with density exactly 1;
//   - with a small budget the keys attended per step, per layer role, equal a hand derivation, and LessIsMore's
//     split of the budget (sinks, keys by score, recent keys) equals the reference's arithmetic worked by hand;
//   - every decode call's kept keys equal a naive re-implementation written here from the reference strategies
//     (double-precision scores, full sorts) and its output equals the double masked attention of kernels/reference
//     over those keys;
//   - bad layer lists and ratios, and calls of other shapes, are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "common/shared_files.h"
#include "common/temp_dir.h"
#include "io/weights/model_weights.h"
#include "kernels/reference/attention_reference.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/omnikv_attention.h"
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

/// Both policies on a 5-layer model: OmniKV filtering at layer 2 (0-1 dense, 3 dense after the filter layer, 4 reuse),
/// LessIsMore selecting at 2 (0-1 dense, 3-4 reuse) and at 1 and 3 (0 dense, 2 and 4 reuse).
struct Baselines {
    OmniKvAttention omnikv;
    LessIsMoreAttention lessismore;
    LessIsMoreAttention lessismore_two;

    Baselines(int n_layers, int tile, TopKRule topk)
        : omnikv(n_layers, {.tile = tile, .topk = topk, .filter_layers = {2}}),
          lessismore(n_layers, {.tile = tile, .topk = topk, .selection_layers = {2}}),
          lessismore_two(n_layers, {.tile = tile, .topk = topk, .selection_layers = {1, 3}}) {}

    std::vector<std::pair<std::string, AttentionPolicy*>> all() {
        return {{"omnikv", &omnikv}, {"lessismore", &lessismore}, {"lessismore{1,3}", &lessismore_two}};
    }
    const std::vector<LayerDensity>& density(const std::string& name) {
        if (name == "omnikv") return omnikv.layer_density();
        return name == "lessismore" ? lessismore.layer_density() : lessismore_two.layer_density();
    }
};

void expect_full_budget_baselines_equal_dense(const Transformer& model, const std::vector<int32_t>& tokens, int prompt,
                                              int tile) {
    const ModelConfig& c = model.config();
    DenseAttention dense;
    const double nll_dense = teacher_forced_decode_nll(model, dense, tokens, prompt);
    const int steps = static_cast<int>(tokens.size()) - 1 - prompt;
    Baselines b(c.n_layers, tile, {.tiles = 1000});
    for (auto& [name, policy] : b.all()) {
        const double nll = teacher_forced_decode_nll(model, *policy, tokens, prompt);
        EXPECT_LT(std::abs(nll - nll_dense) / nll_dense, 1e-6) << name << ": " << nll << " vs " << nll_dense;
        for (int l = 0; l < c.n_layers; ++l) {
            const LayerDensity& d = b.density(name)[l];
            EXPECT_EQ(d.ratio(), 1.0) << name << " layer " << l;
            EXPECT_EQ(d.causal_keys, c.n_heads * decode_causal_keys(prompt, steps, c.window(l)))
                << name << " layer " << l;
        }
    }
}

TEST(OmniKvLessIsMore, FullBudgetEqualsDenseDecodeOnStories260K) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const auto tokens = tokens_for_test(150, w.config.vocab_size);
    for (int tile : {1, 16}) {
        SCOPED_TRACE("tile " + std::to_string(tile));
        expect_full_budget_baselines_equal_dense(model, tokens, 100, tile);
    }
}

TEST(OmniKvLessIsMore, FullBudgetEqualsDenseDecodeOnAWindowedGqaModel) {
    test::TempDir dir("omnikv-window");
    naive::write_random_checkpoint(small_windowed_gqa_config(12), dir.path(), 53);
    const ModelWeights w = load_model(dir.path());
    const Transformer model(w);
    const auto tokens = tokens_for_test(70, w.config.vocab_size);
    for (int tile : {1, 4, 5}) {
        SCOPED_TRACE("tile " + std::to_string(tile));
        expect_full_budget_baselines_equal_dense(model, tokens, 40, tile);
    }
}

TEST(OmniKvLessIsMore, LessIsMoreSplitsTheBudgetAsTheReference) {
    // middle = int(B * (1 - ratio)); the rest is sinks (4, or none when the rest is fewer) and recent keys.
    const auto expect_split = [](int budget, double ratio, int sinks, int by_score, int recent) {
        const LessIsMoreSplit s = lessismore_split(budget, ratio, 4);
        EXPECT_EQ(s.sinks, sinks) << budget << " " << ratio;
        EXPECT_EQ(s.by_score, by_score) << budget << " " << ratio;
        EXPECT_EQ(s.recent, recent) << budget << " " << ratio;
    };
    expect_split(32, 0.25, 4, 24, 4);    // 24 by score, 8 left: 4 sinks + 4 recent
    expect_split(128, 0.25, 4, 96, 28);  // the paper's smallest budget
    expect_split(8, 0.25, 0, 6, 2);      // 2 left, fewer than 4: no sinks
    expect_split(4, 0.25, 0, 3, 1);      // 1 left, fewer than 4: no sinks, 1 recent
    expect_split(7, 1.0, 4, 0, 3);       // everything to sinks and window
    expect_split(64, 0.0, 0, 64, 0);     // everything by score
    expect_split(10, 0.3, 0, 7, 3);      // int(10 * 0.7) = int(7.000000000000001) = 7
}

TEST(OmniKvLessIsMore, KeysPerStepEqualTheHandDerivedBudget) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    const ModelConfig& c = w.config;
    const int prompt = 100, steps = 20;
    const auto tokens = tokens_for_test(prompt + steps + 1, c.vocab_size);
    // Tile 16, two tiles of budget: a reuse layer attends the 32 keys its filter (selection) layer kept among the
    // ~100 before the query's tile, plus that tile's (n_k - 1) % 16 + 1 keys, in every query head. Dense, filter and
    // selection layers attend all n_k keys.
    double sparse = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) sparse += 32 + (n_k - 1) % 16 + 1;
    const double causal = decode_causal_keys(prompt, steps, 0);
    DenseAttention dense;
    const double nll_dense = teacher_forced_decode_nll(model, dense, tokens, prompt);
    Baselines b(c.n_layers, 16, {.tiles = 2});
    for (auto& [name, policy] : b.all()) {
        EXPECT_NE(teacher_forced_decode_nll(model, *policy, tokens, prompt), nll_dense) << name;
        for (int l = 0; l < c.n_layers; ++l) {
            const RunLayerRole role = policy->layer_role(l);
            const LayerDensity& d = b.density(name)[l];
            EXPECT_EQ(d.causal_keys, c.n_heads * causal) << name << " layer " << l;
            EXPECT_EQ(d.attended_keys, c.n_heads * (role == RunLayerRole::Reuse ? sparse : causal))
                << name << " layer " << l;
        }
    }
    const std::vector<RunLayerRole> omnikv_roles{RunLayerRole::Dense, RunLayerRole::Dense, RunLayerRole::Filter,
                                                 RunLayerRole::Dense, RunLayerRole::Reuse};
    const std::vector<RunLayerRole> lessismore_roles{RunLayerRole::Dense, RunLayerRole::Dense, RunLayerRole::Selection,
                                                     RunLayerRole::Reuse, RunLayerRole::Reuse};
    const std::vector<RunLayerRole> two_roles{RunLayerRole::Dense, RunLayerRole::Selection, RunLayerRole::Reuse,
                                              RunLayerRole::Selection, RunLayerRole::Reuse};
    for (int l = 0; l < c.n_layers; ++l) {
        EXPECT_EQ(b.omnikv.layer_role(l), omnikv_roles[l]);
        EXPECT_EQ(b.lessismore.layer_role(l), lessismore_roles[l]);
        EXPECT_EQ(b.lessismore_two.layer_role(l), two_roles[l]);
    }
    // The last step (n_k = 120, its tile from key 112): LessIsMore's 32 keys are the sinks 0..3, the recent keys
    // 108..111 and 24 by score in between.
    const TokenSelection& sel = b.lessismore.selection(2);
    ASSERT_EQ(sel.size(0, 0), 32);
    const std::vector<int32_t> keys(sel.list(0, 0), sel.list(0, 0) + 32);
    EXPECT_EQ(std::vector<int32_t>(keys.begin(), keys.begin() + 4), (std::vector<int32_t>{0, 1, 2, 3}));
    EXPECT_EQ(std::vector<int32_t>(keys.end() - 4, keys.end()), (std::vector<int32_t>{108, 109, 110, 111}));
    EXPECT_EQ(b.omnikv.selection(2).size(0, 0), 32);

    // The paper's percentage rule: k = min(max(k_min, floor(20% n_k)), n_k) - tile with k_min 16: n_k = 101 .. 120
    // give 20 .. 24 - 16 = 4 .. 8 keys before the tile.
    double pct_keys = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) pct_keys += n_k / 5 - 16 + (n_k - 1) % 16 + 1;
    Baselines pct(c.n_layers, 16, {.tiles = 0, .pct = 20, .k_min_tokens = 16});
    for (auto& [name, policy] : pct.all()) {
        teacher_forced_decode_nll(model, *policy, tokens, prompt);
        for (int l = 0; l < c.n_layers; ++l) {
            const double expected = policy->layer_role(l) == RunLayerRole::Reuse ? pct_keys : causal;
            EXPECT_EQ(pct.density(name)[l].attended_keys, c.n_heads * expected) << name << " layer " << l;
        }
    }
}

/// The keys [first, end) ranked by `score` with a full stable sort (higher first, lower index on ties).
std::vector<int32_t> ranked_by_sort(const std::vector<double>& score, int first, int end) {
    std::vector<int32_t> keys(std::max(0, end - first));
    std::iota(keys.begin(), keys.end(), first);
    std::stable_sort(keys.begin(), keys.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    return keys;
}

/// Scaled raw scores of query head h over keys 0..n_k-1 in double.
std::vector<double> head_scores(const AttnShape& s, const float* q, const float* k, int h) {
    std::vector<double> out(s.n_k);
    const int kv = h / s.group_size();
    for (int j = 0; j < s.n_k; ++j) {
        double dot = 0;
        for (int x = 0; x < s.head_dim; ++x)
            dot += static_cast<double>(q[h * s.head_dim + x]) *
                   k[(static_cast<size_t>(kv) * s.kv_stride + j) * s.head_dim + x];
        out[j] = dot * s.scale;
    }
    return out;
}

/// OmniKV's filter step written from OmniKVStrategy.py: softmax per head over the visible keys, amax over all heads,
/// top-k (here the decode budget among the keys before the query's tile).
std::set<int32_t> naive_omnikv_keys(const AttnShape& s, const float* q, const float* k, int tile,
                                    const TopKRule& rule) {
    const int first = s.window > 0 ? std::max(0, s.n_k - s.window) : 0;
    std::vector<double> pooled(s.n_k, 0.0);
    for (int h = 0; h < s.n_q_heads; ++h) {
        const std::vector<double> sc = head_scores(s, q, k, h);
        const double m = *std::max_element(sc.begin() + first, sc.end());
        double sum = 0;
        for (int j = first; j < s.n_k; ++j) sum += std::exp(sc[j] - m);
        for (int j = first; j < s.n_k; ++j) pooled[j] = std::max(pooled[j], std::exp(sc[j] - m) / sum);
    }
    const std::vector<int> cand = reference::decode_candidate_keys(s.n_k, tile, s.window);
    const int budget = reference::decode_token_budget(rule, tile, s.n_k, s.window);
    const std::vector<int32_t> ranked =
        cand.empty() ? std::vector<int32_t>{} : ranked_by_sort(pooled, cand.front(), cand.back() + 1);
    return {ranked.begin(), ranked.begin() + budget};
}

/// LessIsMore's selection step written from LessIsMoreStrategy.py: sinks, recent window, and the per-head top-k of
/// the raw scores between them, united rank by rank (transpose(1, 3) then dict.fromkeys) and cut to the score share.
std::set<int32_t> naive_lessismore_keys(const AttnShape& s, const float* q, const float* k, int tile,
                                        const TopKRule& rule, double ratio) {
    const std::vector<int> cand = reference::decode_candidate_keys(s.n_k, tile, s.window);
    const int budget = reference::decode_token_budget(rule, tile, s.n_k, s.window);
    if (budget == static_cast<int>(cand.size())) return {cand.begin(), cand.end()};
    const int first = cand.front(), end = cand.back() + 1;
    const int middle = static_cast<int>(budget * (1 - ratio));
    int recent = budget - middle, sinks = 4;
    if (recent < sinks) {
        sinks = 0;
    } else {
        recent -= sinks;
    }
    std::vector<std::vector<int32_t>> per_head;
    for (int h = 0; h < s.n_q_heads; ++h)
        per_head.push_back(ranked_by_sort(head_scores(s, q, k, h), first + sinks, end - recent));
    std::vector<int32_t> united;
    for (int r = 0; r < middle; ++r)
        for (int h = 0; h < s.n_q_heads; ++h)
            if (std::find(united.begin(), united.end(), per_head[h][r]) == united.end())
                united.push_back(per_head[h][r]);
    united.resize(middle);
    std::set<int32_t> keys(united.begin(), united.end());
    for (int j = first; j < first + sinks; ++j) keys.insert(j);
    for (int j = end - recent; j < end; ++j) keys.insert(j);
    return keys;
}

/// Attention of the decode query over `keys` plus its own tile (inside its window), in double.
std::vector<double> naive_attention(const AttnShape& s, const reference::AttnInputs& in, int tile,
                                    const std::set<int32_t>& keys) {
    const int p = s.n_k - 1, own = p / tile * tile;
    return reference::masked_attention(s, in.q.data(), in.k.data(), in.v.data(), [&](int, int, int j) {
        const bool visible = j <= p && (s.window == 0 || j > p - s.window);
        return visible && (j >= own || keys.count(j) > 0);
    });
}

TEST(OmniKvLessIsMore, DecodeCallsEqualANaiveReImplementation) {
    const int n_layers = 6;
    const TopKRule rule{.tiles = 0, .pct = 20, .k_min_tokens = 8};
    for (int window : {0, 40}) {
        for (int n_k : {9, 77, 130}) {
            for (int tile : {1, 4}) {
                const std::string what = "window " + std::to_string(window) + " n_k " + std::to_string(n_k) + " tile " +
                                         std::to_string(tile);
                OmniKvAttention omnikv(n_layers, {.tile = tile, .topk = rule, .filter_layers = {2, 4}});
                LessIsMoreAttention lessismore(
                    n_layers, {.tile = tile, .topk = rule, .selection_layers = {1, 4}, .window_ratio = 0.3});
                std::set<int32_t> omnikv_keys, lessismore_keys;
                for (int l = 0; l < n_layers; ++l) {
                    reference::AttnInputs in = reference::random_inputs(8, 2, 16, 1, n_k, 1000 * n_k + 10 * l + tile);
                    in.shape.window = window;
                    const AttnShape& s = in.shape;
                    std::vector<float> out(in.q.size());
                    const AttentionCall call{l, s, in.q.data(), in.k.data(), in.v.data(), out.data(), {}};

                    omnikv.attend(call);
                    const RunLayerRole role = omnikv.layer_role(l);
                    if (role == RunLayerRole::Filter) {
                        omnikv_keys = naive_omnikv_keys(s, in.q.data(), in.k.data(), tile, rule);
                        const TokenSelection& sel = omnikv.selection(l);
                        EXPECT_EQ(std::set<int32_t>(sel.list(0, 0), sel.list(0, 0) + sel.size(0, 0)), omnikv_keys)
                            << what << " omnikv layer " << l;
                    }
                    std::vector<double> ref =
                        role == RunLayerRole::Reuse
                            ? naive_attention(s, in, tile, omnikv_keys)
                            : reference::dense_attention(s, in.q.data(), in.k.data(), in.v.data());
                    EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), ref.size()), 2e-5)
                        << what << " omnikv layer " << l << " (" << mode_name(role) << ")";

                    lessismore.attend(call);
                    const RunLayerRole lrole = lessismore.layer_role(l);
                    if (lrole == RunLayerRole::Selection) {
                        lessismore_keys = naive_lessismore_keys(s, in.q.data(), in.k.data(), tile, rule, 0.3);
                        const TokenSelection& sel = lessismore.selection(l);
                        EXPECT_EQ(std::set<int32_t>(sel.list(0, 0), sel.list(0, 0) + sel.size(0, 0)), lessismore_keys)
                            << what << " lessismore layer " << l;
                    }
                    ref = lrole == RunLayerRole::Reuse
                              ? naive_attention(s, in, tile, lessismore_keys)
                              : reference::dense_attention(s, in.q.data(), in.k.data(), in.v.data());
                    EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), ref.size()), 2e-5)
                        << what << " lessismore layer " << l << " (" << mode_name(lrole) << ")";
                }
            }
        }
    }
}

TEST(OmniKvLessIsMore, BadLayersRatiosAndShapesAreRefused) {
    const TopKRule rule{.tiles = 1};
    const auto omnikv = [&](std::vector<int> layers) { OmniKvAttention(5, {.topk = rule, .filter_layers = layers}); };
    EXPECT_THROW(omnikv({}), Error);      // none given
    EXPECT_THROW(omnikv({1}), Error);     // layers 0 and 1 attend densely
    EXPECT_THROW(omnikv({2, 3}), Error);  // 3 follows a filter layer: dense, would never filter
    EXPECT_THROW(omnikv({4, 2}), Error);  // not ascending
    EXPECT_THROW(omnikv({2, 5}), Error);  // the model has layers 0..4
    EXPECT_NO_THROW(omnikv({2, 4}));
    const auto lessismore = [&](std::vector<int> layers, double ratio) {
        LessIsMoreAttention(5, {.topk = rule, .selection_layers = layers, .window_ratio = ratio});
    };
    EXPECT_THROW(lessismore({}, 0.25), Error);
    EXPECT_THROW(lessismore({3, 3}, 0.25), Error);
    EXPECT_THROW(lessismore({5}, 0.25), Error);
    EXPECT_THROW(lessismore({2}, 1.5), Error);
    EXPECT_THROW(lessismore({2}, -0.1), Error);
    EXPECT_NO_THROW(lessismore({0, 4}, 1.0));
    try {
        omnikv({2, 3});
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("filter-layers=2,3"), std::string::npos) << e.what();
    }

    // A chunk of queries after a prefix is neither a prefill from position 0 nor one decode query.
    const AttnShape chunk{
        .n_q_heads = 2, .n_kv_heads = 1, .head_dim = 8, .n_q = 2, .n_k = 5, .kv_stride = 5, .scale = 1};
    std::vector<float> q(2 * 2 * 8, 0.5f), kv(5 * 8, 0.25f), out(q.size());
    const AttentionCall call{2, chunk, q.data(), kv.data(), kv.data(), out.data(), {}};
    OmniKvAttention o(5, {.topk = rule, .filter_layers = {2}});
    LessIsMoreAttention m(5, {.topk = rule, .selection_layers = {2}});
    EXPECT_THROW(o.attend(call), Error);
    EXPECT_THROW(m.attend(call), Error);
}

}  // namespace
