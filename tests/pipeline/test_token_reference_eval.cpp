// tests/pipeline/test_token_reference_eval.cpp: `kascade eval --key-granularity token` against an independent
// re-implementation of the paper's Kascade in this file (double precision, materialised scores, sharing no code with
// the kernels): dense scores, post-softmax probabilities pooled by sum over the GQA group and the query tile, the
// top-k individual keys before the tile (the paper's k), exact softmax over them plus the tile's own keys. On
// stories260K, for a fixed schedule with two anchors and an argmax head map, and for the oracle, the perplexities
// agree to a relative 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "common/json_output.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/workspace.h"
#include "sweep_fixture.h"

namespace {

using namespace kascade;

constexpr int kCtx = 512, kTile = 16, kKMin = 32;
constexpr double kPct = 10;
constexpr int64_t kCalib = 1022, kTest = 1022;  // two windows each (BOS + 511 text tokens)

/// The paper's k for a sequence of n keys: min(max(k_min, floor(p% n)), n) - tile, at most the keys before the tile.
int paper_k(int n, int q_tile) {
    int k = std::max(kKMin, static_cast<int>(std::floor(kPct / 100.0 * n)));
    k = std::min(k, n) - kTile;
    return std::max(0, std::min(k, q_tile * kTile));
}

/// Kascade in plain loops. selections_[layer][kv_head][q_tile] = the kept keys.
class ReferenceKascade : public AttentionPolicy {
  public:
    explicit ReferenceKascade(std::vector<LayerPlan> plans) : plans_(std::move(plans)), selections_(plans_.size()) {}

    RunLayerRole layer_role(int layer) const override { return run_layer_role(plans_[layer].role); }

    void attend(const AttentionCall& call) override {
        const AttnShape& s = call.shape;
        const int n = s.n_q, d = s.head_dim, group = s.n_q_heads / s.n_kv_heads, n_tiles = (n + kTile - 1) / kTile;
        const LayerPlan& plan = plans_[call.layer];
        // Dense probabilities p[h][i][j] in double.
        std::vector<double> p(static_cast<size_t>(s.n_q_heads) * n * n, 0.0);
        const auto score = [&](int h, int i, int j) {
            const float* q = call.q + (static_cast<size_t>(i) * s.n_q_heads + h) * d;
            const float* k = call.k.f32() + (static_cast<size_t>(h / group) * s.kv_stride + j) * d;
            double dot = 0;
            for (int x = 0; x < d; ++x) dot += static_cast<double>(q[x]) * k[x];
            return dot * s.scale;
        };
        for (int h = 0; h < s.n_q_heads; ++h) {
            for (int i = 0; i < n; ++i) {
                double* row = p.data() + (static_cast<size_t>(h) * n + i) * n;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j] = score(h, i, j));
                for (int j = 0; j <= i; ++j) sum += row[j] = std::exp(row[j] - mx);
                for (int j = 0; j <= i; ++j) row[j] /= sum;
            }
        }
        // Layers whose selection is read later pool and select (layer 0 and anchors; every anchor in the oracle).
        const bool selects =
            plan.role == LayerRole::Anchor || std::any_of(plans_.begin(), plans_.end(), [&](const LayerPlan& o) {
                return o.role == LayerRole::Reuse && o.anchor == call.layer;
            });
        auto& mine = selections_[call.layer];
        if (selects) {
            mine.assign(s.n_kv_heads, std::vector<std::vector<int>>(n_tiles));
            for (int kvh = 0; kvh < s.n_kv_heads; ++kvh) {
                for (int qt = 0; qt < n_tiles; ++qt) {
                    std::vector<double> mass(qt * kTile, 0.0);
                    for (int h = kvh * group; h < (kvh + 1) * group; ++h)
                        for (int i = qt * kTile; i < std::min(n, (qt + 1) * kTile); ++i)
                            for (int j = 0; j < qt * kTile; ++j) mass[j] += p[(static_cast<size_t>(h) * n + i) * n + j];
                    std::vector<int> order(mass.size());
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return mass[a] > mass[b]; });
                    order.resize(paper_k(n, qt));
                    mine[kvh][qt] = order;
                }
            }
        }
        for (int h = 0; h < s.n_q_heads; ++h) {
            const int kvh = h / group;
            for (int i = 0; i < n; ++i) {
                const int qt = i / kTile;
                std::vector<int> keys;
                if (plan.role == LayerRole::Dense) {
                    keys.resize(i + 1);
                    std::iota(keys.begin(), keys.end(), 0);
                } else {
                    keys = plan.role == LayerRole::Anchor ? mine[kvh][qt]
                                                          : selections_[plan.anchor][plan.head_map[kvh]][qt];
                    for (int j = qt * kTile; j <= i; ++j) keys.push_back(j);
                }
                double mx = -INFINITY, sum = 0;
                std::vector<double> w(keys.size());
                for (size_t x = 0; x < keys.size(); ++x) mx = std::max(mx, w[x] = score(h, i, keys[x]));
                for (double& e : w) sum += e = std::exp(e - mx);
                float* out = call.out + (static_cast<size_t>(i) * s.n_q_heads + h) * d;
                for (int y = 0; y < d; ++y) {
                    double acc = 0;
                    for (size_t x = 0; x < keys.size(); ++x)
                        acc += w[x] * call.v.f32()[(static_cast<size_t>(kvh) * s.kv_stride + keys[x]) * d + y];
                    out[y] = static_cast<float>(acc / sum);
                }
            }
        }
    }

  private:
    std::vector<LayerPlan> plans_;
    std::vector<std::vector<std::vector<std::vector<int>>>> selections_;
};

class TokenReferenceEval : public ::testing::Test {
  protected:
    TempDir dir_{"token_reference"};
    fs::path results_ = dir_ / "results";

    /// The --json output of a command run on the results folder.
    nlohmann::json run(const std::string& args) {
        return json_of(run_kascade(args + " --results " + shell_quote(results_) + " --json"));
    }
    std::string eval_args() const {
        return " --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) + " --ctx " +
               std::to_string(kCtx) + " --offset " + std::to_string(kCalib) + " --eval-tokens " +
               std::to_string(kTest) + " --key-granularity token";
    }
    /// Perplexity of the reference policy on the eval's tokens.
    double reference_ppl(std::vector<LayerPlan> plans) {
        Workspace ws(results_);
        LoadedModel& model = ws.model(kStoriesBin, kStoriesTok);
        LoadedText& text = ws.text(kStoriesText, model);
        const Transformer runtime(model.weights);
        ReferenceKascade policy(std::move(plans));
        PerplexityOptions options;
        options.ctx = kCtx;
        options.offset = kCalib;
        options.max_tokens = kTest;
        return evaluate_perplexity(runtime, policy, text.tokens,
                                   sequence_start_token(model.weights.config, model.tokenizer.get()), options)
            .perplexity();
    }
    double stored_ppl(const nlohmann::json& eval_out) {
        const std::string id = eval_out.value("run_id", nlohmann::json(0)).dump();
        return std::stod(db_value(results_ / "kascade.db", "SELECT ppl_sparse FROM run_metrics WHERE run_id = " + id));
    }
};

TEST_F(TokenReferenceEval, FixedScheduleWithTwoAnchorsAndArgmaxHeadMap) {
    const std::string capture =
        run("capture --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) +
            " --calib-tokens " + std::to_string(kCalib) + " --ctx " + std::to_string(kCtx) + " --tile " +
            std::to_string(kTile) + " --save-qk")
            .value("capture_key", "");
    const std::string topk = " --topk-pct " + std::to_string(kPct) + " --k-min " + std::to_string(kKMin);
    const std::string similarity =
        run("similarity --capture " + capture + topk + " --key-granularity token").value("similarity_key", "");
    const nlohmann::json schedule_out =
        run("schedule --similarity " + similarity + " --policy fixed --anchor-list 0,2 --head-map argmax");
    const std::string schedule_id = schedule_out.value("schedule_id", nlohmann::json(0)).dump();
    const double kascade_ppl = stored_ppl(run("eval --schedule " + schedule_id + eval_args()));

    Workspace ws(results_);
    const auto stored = ws.db().load_schedule(std::stoll(schedule_id));
    ASSERT_TRUE(stored.has_value()) << schedule_out;
    const AttentionSchedule schedule = attention_schedule_from(*stored);
    ASSERT_EQ(schedule.count(LayerRole::Reuse), 3);  // layers 1, 3, 4 reuse layers 0 and 2
    bool permuted = false;  // the argmax map is exercised only if it is not the identity somewhere
    for (const LayerPlan& plan : schedule.layers)
        for (size_t h = 0; h < plan.head_map.size(); ++h) permuted = permuted || plan.head_map[h] != int(h);
    EXPECT_TRUE(permuted) << "every head map is the identity: the test would not see a wrong head mapping";
    const double reference = reference_ppl(schedule.layers);
    std::printf("kascade eval ppl %.9f, reference %.9f\n", kascade_ppl, reference);
    EXPECT_LT(std::abs(kascade_ppl - reference) / reference, 1e-6) << kascade_ppl << " vs " << reference;
}

TEST_F(TokenReferenceEval, Oracle) {
    const double oracle_ppl = stored_ppl(run("eval --method oracle --tile " + std::to_string(kTile) + " --topk-pct " +
                                             std::to_string(kPct) + " --k-min " + std::to_string(kKMin) + eval_args()));
    const double reference = reference_ppl(AttentionSchedule::oracle(5).layers);
    std::printf("oracle eval ppl %.9f, reference %.9f\n", oracle_ppl, reference);
    EXPECT_LT(std::abs(oracle_ppl - reference) / reference, 1e-6) << oracle_ppl << " vs " << reference;
}

}  // namespace
