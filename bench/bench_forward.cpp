// bench/bench_forward.cpp: end-to-end prefill speed of the whole model (Google Benchmark), and where the time goes.
//
// Rows are named forward/<model>/ctx:<n>/<method>. Each iteration runs one window of ctx tokens from position 0
// through every layer and the LM head (logits for every position, as perplexity needs them). Counters per row:
//   tokens_per_s   positions per second of wall time
//   matmul_ms      projections, MLP and LM head (Eigen GEMM) per window; matmul_frac = share of the time
//   attention_ms   inside the attention policy per window; other_ms = the rest (norms, RoPE, SwiGLU, copies)
//   speedup        (kascade rows) dense time / own time, both measured in this run
// Models: stories260K (real weights; its trained context is 512, the 2048 row measures speed only) and a
// randomly initialised model with SmolLM2-135M's config.json (30 layers, 9/3 heads, d 64; speed does not depend on
// the weights' values). The kascade rows use a fixed schedule: anchors at every 4th layer, the layers between reuse
// them (identity head map), top-k 10% of the context (k_min 128 tokens), tile 32.
//
// Model files are found under $KASCADE_ASSETS (models/...), else under the build's KASCADE_SHARED_DIR.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_results_reporter.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/transformer.h"

namespace kascade {
namespace {

std::filesystem::path assets_dir() {
    const char* env = std::getenv("KASCADE_ASSETS");
    return env != nullptr && *env ? std::filesystem::path(env) : std::filesystem::path(KASCADE_SHARED_DIR);
}

/// A model of the given config with random weights held in memory (no file).
ModelWeights random_model(const ModelConfig& config, uint64_t seed) {
    auto buffers = std::make_shared<std::vector<std::vector<float>>>();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.04f);
    auto tensor = [&](size_t n, bool is_norm) {
        buffers->emplace_back(n);
        for (float& x : buffers->back()) x = is_norm ? 1.0f + 0.1f * normal(rng) : normal(rng);
        return buffers->back().data();
    };
    auto matrix = [&](size_t rows, size_t cols) {
        return WeightMatrix{DType::F32, tensor(rows * cols, false), static_cast<int>(rows), static_cast<int>(cols)};
    };
    const size_t D = config.dim, H = config.hidden_dim, Q = config.n_heads * config.head_dim,
                 KV = config.n_kv_heads * config.head_dim;
    ModelWeights w;
    w.config = config;
    w.embed = matrix(config.vocab_size, D);
    w.lm_head = w.embed;
    w.layers.resize(config.n_layers);
    for (LayerWeights& l : w.layers) {
        l.attn_norm = tensor(D, true);
        l.wq = matrix(Q, D);
        l.wk = matrix(KV, D);
        l.wv = matrix(KV, D);
        l.wo = matrix(D, Q);
        l.mlp_norm = tensor(D, true);
        l.w_gate = matrix(H, D);
        l.w_up = matrix(H, D);
        l.w_down = matrix(D, H);
    }
    w.final_norm = tensor(D, true);
    w.format = "random";
    w.storage = buffers;
    return w;
}

const ModelWeights& model_named(const std::string& name) {
    static std::map<std::string, ModelWeights> models;
    auto it = models.find(name);
    if (it != models.end()) return it->second;
    if (name == "stories260k") {
        return models.emplace(name, load_model(assets_dir() / "models/stories260K/stories260K.bin")).first->second;
    }
    const ModelConfig config = load_hf_config(assets_dir() / "models/smollm2-135m-tokenizer/config.json");
    return models.emplace(name, random_model(config, 135)).first->second;
}

AttentionSchedule every_fourth_layer_anchors(const ModelConfig& c) {
    AttentionSchedule s = AttentionSchedule::all_dense(c.n_layers);
    for (int l = 1; l < c.n_layers; ++l) {
        if (l % 4 == 0) {
            s.layers[l].role = LayerRole::Anchor;
        } else {
            s.layers[l].role = LayerRole::Reuse;
            s.layers[l].anchor = l / 4 * 4;
            for (int h = 0; h < c.n_kv_heads; ++h) s.layers[l].head_map.push_back(h);
        }
    }
    return s;
}

std::map<std::string, double> g_dense_seconds;  ///< per "<model>/ctx:<n>"

void BM_forward(benchmark::State& state, const std::string& model_name, int ctx, const std::string& method) {
    const ModelWeights& weights = model_named(model_name);
    const ModelConfig& c = weights.config;
    const Transformer model(weights, ctx);
    std::unique_ptr<AttentionPolicy> policy;
    if (method == "dense") {
        policy = std::make_unique<DenseAttention>();
    } else {
        policy = std::make_unique<KascadeAttention>(every_fourth_layer_anchors(c),
                                                    SparseAttentionOptions{.tile = 32, .topk = {0, 10.0f, 128}});
    }
    std::vector<int32_t> tokens(ctx);
    for (int i = 0; i < ctx; ++i) tokens[i] = (i * 7919 + 13) % c.vocab_size;
    KvCache cache(c, ctx);
    std::vector<float> hidden(static_cast<size_t>(ctx) * c.dim);
    constexpr int kLogitRows = 64;
    std::vector<float> logits(static_cast<size_t>(kLogitRows) * c.vocab_size);
    ForwardStats stats;
    double seconds = 0;
    for (auto _ : state) {
        const double t0 = omp_get_wtime();
        cache.clear();
        model.forward(tokens, cache, *policy, hidden.data(), &stats);
        for (int r = 0; r < ctx; r += kLogitRows) {
            model.lm_head(hidden.data() + static_cast<size_t>(r) * c.dim, std::min(kLogitRows, ctx - r), logits.data(),
                          &stats);
        }
        benchmark::DoNotOptimize(logits.data());
        seconds += omp_get_wtime() - t0;
    }
    const double n = static_cast<double>(state.iterations());
    state.counters["tokens_per_s"] = benchmark::Counter(ctx * n / seconds);
    state.counters["matmul_ms"] = stats.matmul_ms / n;
    state.counters["attention_ms"] = stats.attention_ms / n;
    state.counters["other_ms"] = stats.other_ms() / n;
    state.counters["matmul_frac"] = stats.matmul_ms / stats.total_ms;
    state.counters["threads"] = omp_get_max_threads();
    const std::string group = model_name + "/ctx:" + std::to_string(ctx);
    if (method == "dense") {
        g_dense_seconds[group] = seconds / n;
    } else if (g_dense_seconds.count(group)) {
        state.counters["speedup"] = g_dense_seconds[group] / (seconds / n);
    }
}

void register_all() {
    for (const char* model : {"stories260k", "smollm2"}) {
        for (int ctx : {512, 2048}) {
            for (const char* method : {"dense", "kascade"}) {
                const std::string name = std::string("forward/") + model + "/ctx:" + std::to_string(ctx) + "/" + method;
                benchmark::RegisterBenchmark(name.c_str(), BM_forward, std::string(model), ctx, std::string(method))
                    ->Unit(benchmark::kMillisecond)
                    ->MinTime(1.0)
                    ->UseRealTime();
            }
        }
    }
}

}  // namespace
}  // namespace kascade

int main(int argc, char** argv) {
    const auto results_dir = kascade::ResultsDbReporter::take_results_flag(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
    kascade::register_all();
    kascade::run_benchmarks(results_dir);
    benchmark::Shutdown();
    return 0;
}
