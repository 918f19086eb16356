// bench/bench_forward.cpp: whole-model speed (Google Benchmark), timing what `kascade perplexity` / eval and
// `kascade generate` run, against the machine's limits measured in the same run (bench/machine_limits.h).
//
// Rows:
//   prefill/<model>/ctx:<n>/<method>/<numerics>/kv:<kv>   one perplexity window: evaluate_perplexity() over BOS +
//                                                 ctx-1 tokens (forward pass, LM head in chunks, log-softmax scoring)
//   decode/<model>/T:<n>/B:<b>/<method>/<numerics>/kv:<kv>   one new token for each of b sequences after n cached
//                                                 positions each: one batched forward() of b tokens (each sequence its
//                                                 own cache and policy), the LM head of their rows and the greedy
//                                                 picks, as generate --batch does; kv: the KV cache's dtype (f32 or
//                                                 bf16, --kv-dtype)
// numerics: exact (weights as in the file, fp32 activations: --matmul exact), bf16 (file weights, activations
// rounded to BF16: --matmul bf16), f32 (weights expanded to fp32 at load: --weights-dtype f32).
// method: dense, or kascade (anchors at every 4th layer, the layers between reuse them with the identity head map,
// top-k 10 % of the keys with a 128-token floor, tile 32; in decode re-selected for every new token). Decode adds
// oracle (every layer but 0 an anchor), streaming (sink + recent keys), quest (pages of 16, layers 0 and 1 dense),
// omnikv (filter layers 2, 8, 18) and lessismore (selection layers 2, 13; the Kascade paper's layers for
// Llama-3.1-8B, those the model has), all at the same key budget (decode_methods()).
//
// Counters:
//   tokens_per_s          positions (prefill) or new tokens (decode: b per step) per second of wall time
//   matmul_ms, attention_ms, other_ms   the split of one iteration (other = everything else, scoring included);
//   matmul_pct, attn_pct  the shares of matrix products and attention in the iteration's time, in %;
//   norm_ms, rope_kv_ms, act_ms, scoring_ms   parts of other: norms with residual adds, RoPE + KV-cache copy,
//                         SwiGLU, log-softmax of the logits
//   GFLOP/s               prefill: matrix-product flops / matrix-product time
//   GB/s                  decode: bytes of weights + KV cache read per step (the weights once, b caches) / time
//   pct_limit             prefill: GFLOP/s / the GEMM peak of its numerics (BF16 peak for bf16 on BF16 weights, else
//                         fp32 peak); decode: GB/s / memory bandwidth measured at the start of the run
//   pct_bound             decode, dense and Kascade/oracle rows: the row's byte bound (the bytes its method reads per
//                         step at the least, decode_bound_bytes: the weights once, the K/V rows it attends; in an
//                         anchor every K row and the V rows it attends) at the run's bandwidth / the row's time per
//                         step, in %
//   adjacent_GB/s, pct_adjacent   decode: the mean of the bandwidth measured just before and just after the row,
//                         and GB/s over it (a VM's bandwidth drifts with the host's load within minutes)
//   pct_arith             prefill: GFLOP/s / the arithmetic peak of its numerics (multiply-add instructions on
//                         registers, machine_limits::arithmetic_peak_gflops), where the build has one
//   speedup               dense time / own time in the same (model, ctx or T, numerics, kv) group, measured in this run
//   attn_speedup          the same for the attention time alone
//   paired_speedup, paired_attn_speedup   decode, sparse rows: the same two ratios against dense steps run in this row,
//                         one before each of its own steps on the same caches (the row's own counters time only its
//                         own steps), so that a stretch of a shared VM's slower memory falls on both methods alike
//   <role>_layer_ms       decode: the attention time of one layer of that role per step, averaged over the method's
//                         layers of the role (dense_layer_ms; Kascade adds anchor_layer_ms and reuse_layer_ms)
//   kv_speedup            decode, kv:bf16 rows: the same method's kv:f32 time / own time, measured in this run
//   kv_bound              its byte bound: the bytes a dense step reads with an f32 cache / with a bf16 cache
//   batch_speedup         decode, B > 1 rows: tokens/s / tokens/s of the same row at B = 1, measured in this run
//   batch_bound           its byte bound: b x the bytes of a B = 1 dense step / the bytes of the batched dense step
//   idle_write_ms         decode: the 2 MiB regions a step's cache writes touch (per sequence, layer, K and V, the new
//                         position's row of each KV head) x the machine's first write to an idle region
//                         (machine_limits::idle_region_write_us): the part of rope_kv_ms a hypervisor's write traps
//                         take
// Models: stories260K (real weights, fp32 file; prefill only: it is trained to 512 positions), and random BF16
// checkpoints with SmolLM2-135M's and Llama-3.2-1B's config.json written by write_random_checkpoint and loaded by
// load_model (memory-mapped) like any checkpoint. They are written to a temporary folder removed at exit, or kept
// in $KASCADE_BENCH_MODELS and reused. Decode positions beyond a model's max_position_embeddings (SmolLM2 at 32K)
// measure speed only. Decode caches are filled with random keys and values through KvCache::write (so Quest's page
// bounds are real); dense decode speed does not depend on them, and the sparse methods attend the same number of keys
// whatever they are.
//
// Model files are found under $KASCADE_ASSETS (models/...), else under the build's KASCADE_SHARED_DIR.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/cache_aligned.h"
#include "bench/bench_results_reporter.h"
#include "bench/machine_limits.h"
#include "io/weights/model_weights.h"
#include "io/weights/random_checkpoint.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/omnikv_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/quest_attention.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/runtime/transformer.h"

namespace kascade {
namespace {

std::filesystem::path assets_dir() {
    const char* env = std::getenv("KASCADE_ASSETS");
    return env != nullptr && *env ? std::filesystem::path(env) : std::filesystem::path(KASCADE_SHARED_DIR);
}

// ---- numerics ----

enum class Numerics { Exact, Bf16, F32 };

const char* numerics_name(Numerics n) {
    switch (n) {
        case Numerics::Exact:
            return "exact";
        case Numerics::Bf16:
            return "bf16";
        case Numerics::F32:
            return "f32";
    }
    return "?";
}

WeightsDType weights_dtype(Numerics n) {
    return n == Numerics::F32 ? WeightsDType::F32 : WeightsDType::File;
}

MatmulPrecision matmul_precision(Numerics n) {
    return n == Numerics::Bf16 ? MatmulPrecision::Bf16 : MatmulPrecision::Exact;
}

// ---- models ----

/// Where the random checkpoints go: $KASCADE_BENCH_MODELS (kept), else a temporary folder removed at exit.
class ModelFolder {
  public:
    ModelFolder() {
        const char* env = std::getenv("KASCADE_BENCH_MODELS");
        if (env != nullptr && *env) {
            path_ = env;
        } else {
            path_ = std::filesystem::temp_directory_path() / ("kascade-bench-forward-" + std::to_string(getpid()));
            temporary_ = true;
        }
    }
    ~ModelFolder() {
        std::error_code ignored;
        if (temporary_) std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
    bool temporary_ = false;
};

ModelFolder& model_folder() {
    static ModelFolder folder;
    return folder;
}

/// The checkpoint of a benchmark model, written first if it is a random one.
std::filesystem::path model_path(const std::string& name) {
    if (name == "stories260k") return assets_dir() / "models/stories260K/stories260K.bin";
    const std::filesystem::path config = name == "smollm2" ? assets_dir() / "models/smollm2-135m-tokenizer/config.json"
                                                           : assets_dir() / "models/configs/llama-3.2-1b/config.json";
    const std::filesystem::path dir = model_folder().path() / name;
    if (!std::filesystem::exists(dir / "model.safetensors")) {
        write_random_checkpoint(config, dir, RandomCheckpointOptions{.seed = 1, .layers = 0, .dtype = DType::BF16});
    }
    return dir;
}

/// The weights of `name` in the dtype `numerics` needs; one model is held at a time (rows are registered grouped
/// by model and dtype, so each is loaded once).
const ModelWeights& model_weights(const std::string& name, Numerics numerics) {
    static std::string loaded_key;
    static std::unique_ptr<ModelWeights> loaded;
    const std::string key = name + "/" + std::string(mode_name(weights_dtype(numerics)));
    if (key != loaded_key) {
        loaded.reset();
        loaded = std::make_unique<ModelWeights>(load_model(model_path(name), LoadOptions{weights_dtype(numerics)}));
        loaded_key = key;
    }
    return *loaded;
}

size_t matrix_elements(const WeightMatrix& m) {
    return static_cast<size_t>(m.rows) * m.cols;
}

/// Multiply-adds of the layer matrices per token.
double layer_macs_per_token(const ModelWeights& w) {
    double macs = 0;
    for (const LayerWeights& l : w.layers) {
        for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
            macs += static_cast<double>(matrix_elements(*m));
        }
    }
    return macs;
}

/// Bytes of a decode step of `batch` sequences outside attention: every layer matrix and the LM head once, one
/// embedding row per sequence.
double weight_bytes(const ModelWeights& w, int batch) {
    auto bytes = [](const WeightMatrix& m) { return static_cast<double>(matrix_elements(m) * dtype_size(m.dtype)); };
    double total = bytes(w.lm_head) + static_cast<double>(w.embed.cols * dtype_size(w.embed.dtype)) * batch;
    for (const LayerWeights& l : w.layers) {
        for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) total += bytes(*m);
    }
    return total;
}

/// Bytes of one sequence's key rows (or value rows) in `layer` that a query at `positions` sees: those within the
/// layer's window, in the cache's dtype.
double layer_cache_bytes(const ModelConfig& c, int layer, int positions, KvDType kv) {
    const int window = c.window(layer);
    const int keys = window > 0 ? std::min(window, positions) : positions;
    return static_cast<double>(keys) * c.n_kv_heads * c.head_dim *
           (kv == KvDType::F32 ? sizeof(float) : sizeof(uint16_t));
}

/// Bytes one dense decode step of `batch` sequences reads from memory: the weights, and per sequence the keys and
/// values every layer sees.
double decode_bytes(const ModelWeights& w, int positions, KvDType kv, int batch = 1) {
    double total = weight_bytes(w, batch);
    for (int layer = 0; layer < w.config.n_layers; ++layer)
        total += 2.0 * batch * layer_cache_bytes(w.config, layer, positions, kv);
    return total;
}

/// The least bytes one decode step of `batch` sequences under `policy` reads: the weights once, and per sequence and
/// layer the K and V rows it attends, except in an anchor layer (Kascade's anchors, the oracle's layers): every K row
/// (its scoring reads them all, and its attention takes the selected keys' scores from there) and the V rows it
/// attends. Dense attends every key; a KascadeAttention its measured share
/// (layer_density), the query heads of a KV head sharing their rows. Empty for the other policies, whose selection
/// reads what this does not count (Quest's page bounds, selection layers' scores).
std::optional<double> decode_bound_bytes(const ModelWeights& w, const AttentionPolicy& policy, int positions,
                                         KvDType kv, int batch) {
    const auto* kascade = dynamic_cast<const KascadeAttention*>(&policy);
    if (kascade == nullptr && dynamic_cast<const DenseAttention*>(&policy) == nullptr) return std::nullopt;
    double total = weight_bytes(w, batch);
    for (int layer = 0; layer < w.config.n_layers; ++layer) {
        double passes = 2;  // over the layer's cache: its K and V rows, or the share of them attended
        if (kascade != nullptr && policy.layer_role(layer) != RunLayerRole::Dense) {
            const double attended = kascade->layer_density()[static_cast<size_t>(layer)].ratio();
            passes = policy.layer_role(layer) == RunLayerRole::Anchor ? 1 + attended : 2 * attended;
        }
        total += passes * batch * layer_cache_bytes(w.config, layer, positions, kv);
    }
    return total;
}

// ---- attention methods ----

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

/// A way of attending that a row can run; the first of each list is the baseline of `speedup`.
struct AttentionMethod {
    EvalMethod method;
    std::function<std::unique_ptr<AttentionPolicy>(const ModelConfig&)> make;
};

AttentionMethod dense_method() {
    return {EvalMethod::Dense, [](const ModelConfig&) { return std::make_unique<DenseAttention>(); }};
}

/// The sparse methods' options: tile 32, top-k 10 % of the keys with a 128-token floor (the paper's k rule).
const SparseAttentionOptions kSparseOptions{.tile = 32, .topk = {.tiles = 0, .pct = 10.0f, .k_min_tokens = 128}};

AttentionMethod kascade_method() {
    return {EvalMethod::Kascade, [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                return std::make_unique<KascadeAttention>(every_fourth_layer_anchors(c), kSparseOptions);
            }};
}

/// The layers of `layers` that a model of n_layers has.
std::vector<int> layers_below(std::vector<int> layers, int n_layers) {
    std::erase_if(layers, [n_layers](int l) { return l >= n_layers; });
    return layers;
}

/// Decode methods: dense first (the baseline of `speedup`), then every sparse decode policy at the same budget.
std::vector<AttentionMethod> decode_methods() {
    return {dense_method(),
            kascade_method(),
            {EvalMethod::Oracle,
             [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                 return std::make_unique<KascadeAttention>(AttentionSchedule::oracle(c.n_layers), kSparseOptions);
             }},
            {EvalMethod::Streaming,
             [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                 return std::make_unique<StreamingAttention>(c.n_layers, kSparseOptions);
             }},
            {EvalMethod::Quest,
             [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                 return std::make_unique<QuestAttention>(c.n_layers,
                                                         QuestOptions{.page = 16, .topk = kSparseOptions.topk});
             }},
            {EvalMethod::OmniKv,
             [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                 return std::make_unique<OmniKvAttention>(
                     c.n_layers, OmniKvOptions{.tile = kSparseOptions.tile,
                                               .topk = kSparseOptions.topk,
                                               .filter_layers = layers_below({2, 8, 18}, c.n_layers)});
             }},
            {EvalMethod::LessIsMore, [](const ModelConfig& c) -> std::unique_ptr<AttentionPolicy> {
                 return std::make_unique<LessIsMoreAttention>(
                     c.n_layers, LessIsMoreOptions{.tile = kSparseOptions.tile,
                                                   .topk = kSparseOptions.topk,
                                                   .selection_layers = layers_below({2, 13}, c.n_layers)});
             }}};
}

// ---- measurement ----

machine_limits::MachineLimits g_limits;
/// Per "<kind>/<model>/<size>/<numerics>[/<kv>]": the dense row's seconds and attention milliseconds per iteration.
std::map<std::string, std::pair<double, double>> g_dense_time;
/// Per "<model>/<T>/<numerics>/<method>": the batch-1 kv:f32 decode row's seconds per iteration (kv_speedup's
/// baseline).
std::map<std::string, double> g_f32_kv_time;
/// Per "<model>/<T>/<numerics>/<method>/<kv>": the batch-1 decode row's tokens/s (batch_speedup's baseline).
std::map<std::string, double> g_batch1_tokens_per_s;

void report_speedup(benchmark::State& state, const std::string& group, EvalMethod method, double seconds,
                    double attention_ms) {
    if (method == EvalMethod::Dense) {
        g_dense_time[group] = {seconds, attention_ms};
    } else if (g_dense_time.count(group)) {
        state.counters["speedup"] = g_dense_time[group].first / seconds;
        state.counters["attn_speedup"] = g_dense_time[group].second / attention_ms;
    }
}

/// Decode: the mean attention time of one layer of each role the method gives its layers, per step (`<role>_layer_ms`,
/// e.g. Kascade's dense layer 0, its anchors and its reuse layers), so a row's attention_ms can be read layer by layer
/// against the dense row's dense_layer_ms.
void report_layer_roles(benchmark::State& state, const ForwardStats& stats, const AttentionPolicy& policy, double n) {
    std::map<RunLayerRole, std::pair<double, int>> by_role;  // summed ms, layers
    for (size_t l = 0; l < stats.layer_attention_ms.size(); ++l) {
        auto& [ms, layers] = by_role[policy.layer_role(static_cast<int>(l))];
        ms += stats.layer_attention_ms[l];
        ++layers;
    }
    for (const auto& [role, sum] : by_role)
        state.counters[std::string(mode_name(role)) + "_layer_ms"] = sum.first / sum.second / n;
}

void report_split(benchmark::State& state, const ForwardStats& stats, double seconds, double scoring_ms, double n) {
    const double total_ms = seconds * 1e3;
    state.counters["matmul_ms"] = stats.matmul_ms / n;
    state.counters["attention_ms"] = stats.attention_ms / n;
    state.counters["matmul_pct"] = 100.0 * stats.matmul_ms / total_ms;
    state.counters["attn_pct"] = 100.0 * stats.attention_ms / total_ms;
    state.counters["other_ms"] = (total_ms - stats.matmul_ms - stats.attention_ms) / n;
    state.counters["norm_ms"] = stats.norm_ms / n;
    state.counters["rope_kv_ms"] = stats.rope_kv_ms / n;
    state.counters["act_ms"] = stats.activation_ms / n;
    state.counters["scoring_ms"] = scoring_ms / n;
    state.counters["threads"] = omp_get_max_threads();
}

/// Token ids for a synthetic text: deterministic, spread over the vocabulary.
std::vector<int32_t> synthetic_tokens(int count, int vocab_size) {
    std::vector<int32_t> tokens(count);
    for (int i = 0; i < count; ++i) tokens[i] = static_cast<int32_t>((i * 7919ll + 13) % vocab_size);
    return tokens;
}

void BM_prefill(benchmark::State& state, const std::string& model_name, int ctx, Numerics numerics,
                const AttentionMethod& method, KvDType kv) {
    const ModelWeights& weights = model_weights(model_name, numerics);
    const ModelConfig& c = weights.config;
    const Transformer model(weights, ctx, matmul_precision(numerics));
    const std::unique_ptr<AttentionPolicy> policy = method.make(c);
    const int32_t bos = sequence_start_token(c, nullptr);
    const int text_tokens = bos >= 0 ? ctx - 1 : ctx;
    const std::vector<int32_t> text = synthetic_tokens(text_tokens, c.vocab_size);
    const PerplexityOptions options{.ctx = ctx, .offset = 0, .max_tokens = text_tokens, .kv_dtype = kv};
    {
        // Warm-up: every weight paged in and the activation buffers grown, on a short window.
        const PerplexityOptions short_window{.ctx = std::min(ctx, 64), .offset = 0, .max_tokens = 0};
        evaluate_perplexity(model, *policy, std::span(text).first(std::min(text_tokens, 63)), bos, short_window);
    }
    ForwardStats stats;
    double seconds = 0, scoring_ms = 0;
    for (auto _ : state) {
        const PerplexityResult r = evaluate_perplexity(model, *policy, text, bos, options);
        benchmark::DoNotOptimize(r.nll_sum);
        seconds += r.seconds;
        scoring_ms += r.scoring_ms;
        stats.matmul_ms += r.stats.matmul_ms;
        stats.attention_ms += r.stats.attention_ms;
        stats.norm_ms += r.stats.norm_ms;
        stats.rope_kv_ms += r.stats.rope_kv_ms;
        stats.activation_ms += r.stats.activation_ms;
    }
    const double n = static_cast<double>(state.iterations());
    report_split(state, stats, seconds, scoring_ms, n);
    state.counters["tokens_per_s"] = ctx * n / seconds;
    // Every position runs through the layers; ctx - 1 rows are scored through the LM head (with or without BOS).
    const double flops =
        2.0 * (layer_macs_per_token(weights) * ctx + static_cast<double>(matrix_elements(weights.lm_head)) * (ctx - 1));
    const double gflops = flops * n / (stats.matmul_ms * 1e-3) * 1e-9;
    const bool bf16_products = numerics == Numerics::Bf16 && weights.layers[0].wq.dtype == DType::BF16;
    state.counters["GFLOP/s"] = gflops;
    state.counters["pct_limit"] =
        100.0 * gflops / (bf16_products ? g_limits.bf16_gemm_gflops : g_limits.fp32_gemm_gflops);
    const double arithmetic_peak = bf16_products ? g_limits.bf16_arith_gflops : g_limits.fp32_arith_gflops;
    if (arithmetic_peak > 0) state.counters["pct_arith"] = 100.0 * gflops / arithmetic_peak;
    report_speedup(state,
                   "prefill/" + model_name + "/" + std::to_string(ctx) + "/" + numerics_name(numerics) + "/" +
                       std::string(mode_name(kv)),
                   method.method, seconds / n, stats.attention_ms / n);
}

/// Fills every layer of `cache` with `positions` random keys and values (through KvCache::write, which keeps page
/// bounds if the cache has them) and sets its length.
void fill_cache(KvCache& cache, const ModelConfig& c, int positions) {
    constexpr int kChunk = 1024;  ///< positions written per call
    const size_t row = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
    std::vector<float> k_rows(kChunk * row), v_rows(kChunk * row);
    for (int pos0 = 0; pos0 < positions; pos0 += kChunk) {
        const int n = std::min(kChunk, positions - pos0);
        for (int l = 0; l < c.n_layers; ++l) {
            for (std::vector<float>* rows : {&k_rows, &v_rows}) {
                const uint32_t salt = (rows == &k_rows ? 1u : 2u) + l * 97u;
                float* data = rows->data();
#pragma omp parallel for schedule(static)
                for (size_t i = 0; i < n * row; ++i) {
                    uint32_t s = static_cast<uint32_t>((pos0 * row + i) * 2654435761u + salt);
                    s ^= s >> 15, s *= 2246822519u, s ^= s >> 13;
                    data[i] =
                        static_cast<float>(static_cast<int32_t>(s >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
                }
            }
            cache.write(l, k_rows.data(), v_rows.data(), n);
        }
        cache.advance(n);
    }
}

/// The distinct huge-page-sized regions (CacheLineAllocator::kHugePageBytes, the caches' pages) a decode step writes in
/// `caches`: per cache, layer, keys and values, the row of position `position` of every KV head.
size_t written_regions(const std::vector<std::unique_ptr<KvCache>>& caches, const ModelConfig& c, int position) {
    constexpr size_t kRegion = CacheLineAllocator<char>::kHugePageBytes;
    std::set<uintptr_t> regions;
    for (const std::unique_ptr<KvCache>& cache : caches) {
        for (int l = 0; l < c.n_layers; ++l) {
            for (const KvPtr& base : {cache->keys(l), cache->values(l)}) {
                for (int h = 0; h < c.n_kv_heads; ++h) {
                    const KvPtr row = base + (static_cast<int64_t>(h) * cache->capacity() + position) * c.head_dim;
                    regions.insert(row.visit([](const auto* p) { return reinterpret_cast<uintptr_t>(p); }) / kRegion);
                }
            }
        }
    }
    return regions.size();
}

void BM_decode(benchmark::State& state, const std::string& model_name, int positions, int batch, Numerics numerics,
               const AttentionMethod& method, KvDType kv) {
    const ModelWeights& weights = model_weights(model_name, numerics);
    const ModelConfig& c = weights.config;
    const Transformer model(weights, positions + 1, matmul_precision(numerics));
    // Each sequence its own policy (per-sequence selection state) and cache.
    std::vector<std::unique_ptr<AttentionPolicy>> policies;
    std::vector<std::unique_ptr<KvCache>> caches;
    for (int b = 0; b < batch; ++b) {
        policies.push_back(method.make(c));
        caches.push_back(std::make_unique<KvCache>(c, positions + 1, policies.back()->kv_page_size(), kv));
        fill_cache(*caches.back(), c, positions);
    }
    // A sparse row also runs dense steps on the same caches, one before each of its own (paired_speedup): each
    // method its own policies and its own greedy tokens, so each runs the steps it would run alone.
    const bool paired = method.method != EvalMethod::Dense;
    std::vector<std::unique_ptr<AttentionPolicy>> dense_policies;
    if (paired)
        for (int b = 0; b < batch; ++b) dense_policies.push_back(dense_method().make(c));
    std::vector<float> hidden(static_cast<size_t>(batch) * c.dim), logits(static_cast<size_t>(batch) * c.vocab_size);
    const int32_t first_token = c.bos_token_id >= 0 ? c.bos_token_id : 0;
    std::vector<int32_t> tokens(batch, first_token), dense_tokens(batch, first_token);
    ForwardStats stats, dense_stats;
    auto step = [&](const std::vector<std::unique_ptr<AttentionPolicy>>& step_policies, std::vector<int32_t>& ids,
                    ForwardStats* s) {
        std::vector<ForwardSequence> sequences;
        for (int b = 0; b < batch; ++b) {
            caches[b]->truncate(positions);
            sequences.push_back({std::span(&ids[b], 1), caches[b].get(), step_policies[b].get()});
        }
        const double t0 = omp_get_wtime();
        model.forward(sequences, hidden.data(), s);
        model.lm_head(hidden.data(), batch, logits.data(), s);
        for (int b = 0; b < batch; ++b) {
            const float* row = logits.data() + static_cast<size_t>(b) * c.vocab_size;
            ids[b] = static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row);
        }
        return omp_get_wtime() - t0;
    };
    step(policies, tokens, nullptr);  // warm-up: weights paged in
    if (paired) step(dense_policies, dense_tokens, nullptr);
    policies[0]->reset_density();
    // The bandwidth just before and just after the row as well as at the start of the run: on a shared VM it moves
    // with the host's other tenants from one minute to the next.
    const double gbps_before = machine_limits::memory_read_gbps();
    double seconds = 0, dense_seconds = 0;
    for (auto _ : state) {
        if (paired) dense_seconds += step(dense_policies, dense_tokens, &dense_stats);
        const double own = step(policies, tokens, &stats);
        state.SetIterationTime(own);  // the row's time column: its own steps only
        seconds += own;
    }
    const double adjacent_gbps = (gbps_before + machine_limits::memory_read_gbps()) / 2;
    const double n = static_cast<double>(state.iterations());
    report_split(state, stats, seconds, 0, n);
    report_layer_roles(state, stats, *policies[0], n);
    const double tokens_per_s = batch * n / seconds;
    state.counters["tokens_per_s"] = tokens_per_s;
    const double gbps = decode_bytes(weights, positions + 1, kv, batch) * n / seconds * 1e-9;
    state.counters["GB/s"] = gbps;
    state.counters["pct_limit"] = 100.0 * gbps / g_limits.memory_gbps;
    state.counters["adjacent_GB/s"] = adjacent_gbps;
    state.counters["pct_adjacent"] = 100.0 * gbps / adjacent_gbps;
    state.counters["idle_write_ms"] = written_regions(caches, c, positions) * g_limits.idle_write_us * 1e-3;
    if (const auto bound = decode_bound_bytes(weights, *policies[0], positions + 1, kv, batch))
        state.counters["pct_bound"] = 100.0 * *bound * n / seconds * 1e-9 / g_limits.memory_gbps;
    const std::string row = model_name + "/" + std::to_string(positions) + "/" + numerics_name(numerics);
    const std::string kv_name(mode_name(kv));
    report_speedup(state, "decode/" + row + "/" + std::to_string(batch) + "/" + kv_name, method.method, seconds / n,
                   stats.attention_ms / n);
    if (paired) {
        state.counters["paired_speedup"] = dense_seconds / seconds;
        state.counters["paired_attn_speedup"] = dense_stats.attention_ms / stats.attention_ms;
    }
    const std::string same_row = row + "/" + std::string(mode_name(method.method)) + "/" + kv_name;
    if (batch == 1) {
        g_batch1_tokens_per_s[same_row] = tokens_per_s;
    } else if (g_batch1_tokens_per_s.count(same_row)) {
        state.counters["batch_speedup"] = tokens_per_s / g_batch1_tokens_per_s[same_row];
        state.counters["batch_bound"] =
            batch * decode_bytes(weights, positions + 1, kv) / decode_bytes(weights, positions + 1, kv, batch);
    }
    if (batch > 1) return;  // kv_speedup compares batch-1 rows
    const std::string same_method = row + "/" + std::string(mode_name(method.method));
    if (kv == KvDType::F32) {
        g_f32_kv_time[same_method] = seconds / n;
    } else if (g_f32_kv_time.count(same_method)) {
        state.counters["kv_speedup"] = g_f32_kv_time[same_method] / (seconds / n);
        state.counters["kv_bound"] =
            decode_bytes(weights, positions + 1, KvDType::F32) / decode_bytes(weights, positions + 1, kv);
    }
}

// ---- rows ----

std::string size_label(int n) {
    return n % 1024 == 0 ? std::to_string(n / 1024) + "K" : std::to_string(n);
}

void register_prefill(const std::string& model, int ctx, Numerics numerics, const AttentionMethod& method,
                      KvDType kv = KvDType::F32) {
    const std::string name = "prefill/" + model + "/ctx:" + std::to_string(ctx) + "/" +
                             std::string(mode_name(method.method)) + "/" + numerics_name(numerics) +
                             "/kv:" + std::string(mode_name(kv));
    benchmark::RegisterBenchmark(name.c_str(), BM_prefill, model, ctx, numerics, method, kv)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(2.0)
        ->UseRealTime();
}

void register_decode(const std::string& model, int positions, int batch, Numerics numerics,
                     const AttentionMethod& method, KvDType kv) {
    const std::string name = "decode/" + model + "/T:" + size_label(positions) + "/B:" + std::to_string(batch) + "/" +
                             std::string(mode_name(method.method)) + "/" + numerics_name(numerics) +
                             "/kv:" + std::string(mode_name(kv));
    benchmark::RegisterBenchmark(name.c_str(), BM_decode, model, positions, batch, numerics, method, kv)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(1.0)
        ->UseManualTime();
}

/// Grouped by model and weights dtype (exact and bf16 share the file's weights), so each model is loaded once per
/// dtype.
void register_all() {
    register_prefill("stories260k", 512, Numerics::Exact, dense_method());

    struct ModelRows {
        std::string model;
        std::vector<int> prefill_ctx;
        int kascade_ctx;  ///< prefill ctx with Kascade rows too (0: none)
        std::vector<int> decode_positions;
    };
    const ModelRows models[] = {{"smollm2", {512, 2048}, 0, {64, 8192, 32768}},
                                {"llama32_1b", {512, 4096}, 4096, {8192, 32768}}};
    for (const ModelRows& m : models) {
        for (Numerics numerics : {Numerics::Exact, Numerics::Bf16, Numerics::F32}) {
            for (int ctx : m.prefill_ctx) {
                register_prefill(m.model, ctx, numerics, dense_method());
                if (ctx == m.kascade_ctx && numerics != Numerics::F32) {
                    register_prefill(m.model, ctx, numerics, kascade_method());
                    // A BF16 cache where attention is a visible share of the prefill.
                    for (const AttentionMethod& method : {dense_method(), kascade_method()})
                        register_prefill(m.model, ctx, numerics, method, KvDType::BF16);
                }
            }
            if (numerics == Numerics::F32) continue;  // decode: the file's BF16 weights, the two numerics
            for (int positions : m.decode_positions) {
                // kv:f32 first: the baseline of the kv:bf16 rows' kv_speedup.
                for (KvDType kv : {KvDType::F32, KvDType::BF16}) {
                    // Sparse decode rows from 8K cached tokens on (at 64 the 128-key floor keeps every key anyway).
                    for (const AttentionMethod& method : decode_methods()) {
                        if (positions >= 8192 || method.method == EvalMethod::Dense)
                            register_decode(m.model, positions, 1, numerics, method, kv);
                    }
                }
                // Batch 8 of the 1B shape, BF16 cache (eight 32K caches in f32 would need 17 GB): dense and Kascade,
                // after their batch-1 rows (the baseline of batch_speedup).
                if (m.model != "llama32_1b" || positions < 8192) continue;
                for (const AttentionMethod& method : {dense_method(), kascade_method()})
                    register_decode(m.model, positions, 8, numerics, method, KvDType::BF16);
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
    kascade::g_limits = kascade::machine_limits::measure();
    benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
    benchmark::AddCustomContext("matmul_path", kascade::matmul_path());
    benchmark::AddCustomContext("bf16_gemm_gflops", std::to_string(kascade::g_limits.bf16_gemm_gflops));
    benchmark::AddCustomContext("fp32_gemm_gflops", std::to_string(kascade::g_limits.fp32_gemm_gflops));
    benchmark::AddCustomContext("memory_gbps", std::to_string(kascade::g_limits.memory_gbps));
    benchmark::AddCustomContext("bf16_arith_gflops", std::to_string(kascade::g_limits.bf16_arith_gflops));
    benchmark::AddCustomContext("fp32_arith_gflops", std::to_string(kascade::g_limits.fp32_arith_gflops));
    benchmark::AddCustomContext("idle_write_us", std::to_string(kascade::g_limits.idle_write_us));
    kascade::register_all();
    kascade::run_benchmarks(results_dir);
    benchmark::Shutdown();
    return 0;
}
