// bench/bench_attention.cpp: speed of the attention kernels at the shapes of real models (Google Benchmark).
//
// Rows are named <kind>/<model>/T:<tokens>/<variant> so any subset can be selected with --benchmark_filter, e.g.
//   bench_attention --benchmark_filter='prefill/smollm2/T:8192'     or     --benchmark_filter='decode/.*/T:131072'
// Decode rows come three times: over an fp32 cache with exact products, and over a BF16 cache with exact or BF16
// products, named <variant>/exact/kv:bf16 and <variant>/bf16/kv:bf16 (what `--kv-dtype bf16` runs with `--matmul
// exact` or `bf16`). Every row measures a FULL attention layer (all
// query heads) of the named model. Within a (kind, model, T[, dtype]) group the dense row runs first and stores its
// time; the other rows report `speedup` = dense time / own time from the same run (0 if the dense row was filtered
// out). The first row measures a large Eigen GEMM, the machine's practical fp32 peak in this run; prefill rows report
// `pct_gemm` = own GFLOP/s / GEMM GFLOP/s, decode rows `pct_bw` = own GB/s / the machine's read bandwidth (measured at
// the first decode row).
//
// Times are wall clock (the kernels are multi-threaded); a decode row's time is per call, over caches that rotate
// through enough copies to miss the last-level cache (DecodeCaches). Counters: GFLOP/s counts the multiply-adds
// actually performed (4 * head_dim flops per attended (query, key) pair and query head: 2 for Q.K, 2 for P.V; a
// scores-only pass counts 2); GB/s counts the K and V bytes a decode reads; density = attended keys / causal keys.
//
// Prefill rows: anchor_* / reuse_* select whole key tiles (the first prototype's block-sparse variant), token_* select
// individual keys (the paper's Kascade; the reuse rows gather the selected K/V rows per KV head and query tile). "N
// pct" rows use the per-tile visible-context k rule (about N% of the causal pairs at both granularities); "paperN pct"
// rows the paper's k = N% of the whole sequence minus the tile, which keeps nearly twice the causal pairs in prefill.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/bf16.h"
#include "base/cache_aligned.h"
#include "bench/bench_results_reporter.h"
#include "bench/machine_limits.h"
#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"
#include "kernels/topk_tiles.h"
#include "pipeline/runtime/kascade_attention.h"

namespace kascade {
namespace {

constexpr int kTile = 32;  ///< Kascade tile (the paper's 32-query tiles)

struct ModelShape {
    const char* name;
    int n_q_heads, n_kv_heads, head_dim;
};

constexpr ModelShape kModels[] = {{"smollm2", 9, 3, 64}, {"llama32_1b", 32, 8, 64}, {"llama3_8b", 32, 8, 128}};
constexpr int kPrefillLengths[] = {2048, 8192, 16384};
constexpr int kDecodeLengths[] = {8192, 32768, 131072};

double g_gemm_gflops = 0;                       ///< measured by the first row
std::map<std::string, double> g_dense_seconds;  ///< per "<kind>/<model>/T:<n>[/bf16/kv:bf16]": dense time per call

/// The machine's read bandwidth (machine_limits), measured at the first decode row, in GB/s.
double memory_gbps() {
    static const double gbps = machine_limits::memory_read_gbps();
    return gbps;
}

struct Inputs {
    AttnShape shape;
    std::vector<float> q, k, v, out;
};

Inputs make_inputs(const ModelShape& m, int n_q, int n_k) {
    Inputs in;
    in.shape.n_q_heads = m.n_q_heads;
    in.shape.n_kv_heads = m.n_kv_heads;
    in.shape.head_dim = m.head_dim;
    in.shape.n_q = n_q;
    in.shape.n_k = n_k;
    in.shape.kv_stride = n_k;
    in.shape.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim));
    in.q.resize(static_cast<size_t>(n_q) * m.n_q_heads * m.head_dim);
    in.k.resize(static_cast<size_t>(n_k) * m.n_kv_heads * m.head_dim);
    in.v.resize(in.k.size());
    in.out.resize(in.q.size());
    in.q = machine_limits::uniform_floats(in.q.size(), 1);
    in.k = machine_limits::uniform_floats(in.k.size(), 2);
    in.v = machine_limits::uniform_floats(in.v.size(), 3);
    return in;
}

/// A selection at the given top-k percentage: the top-k of random tile scores (unstructured, so few adjacent tiles
/// merge into longer runs: the kernel's least favourable case).
TileSelection random_selection(int n_kv_heads, int n, float pct, uint64_t seed) {
    TileMass scores;
    scores.n_kv_heads = n_kv_heads;
    scores.n_q_tiles = scores.n_k_tiles = tile_count(n, kTile);
    scores.tile = kTile;
    scores.n_keys = n;
    scores.mass.resize(static_cast<size_t>(n_kv_heads) * scores.n_q_tiles * scores.n_k_tiles);
    scores.mass = machine_limits::uniform_floats(scores.mass.size(), seed);
    return select_topk_tiles(scores, TopKRule{0, pct, 128, KRule::Visible});
}

/// (query, key) pairs one query head attends to under `sel` (selected tiles + causal diagonal), per KV head averaged.
double sparse_pairs(const TileSelection& sel, int n) {
    double pairs = 0;
    for (int h = 0; h < sel.n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            const double rows = std::min(kTile, n - qt * kTile);
            pairs += sel.size(h, qt) * static_cast<double>(kTile) * rows + rows * (rows + 1) / 2;
        }
    }
    return pairs / sel.n_kv_heads;
}

/// A token-level selection under `rule`: topk_token_budget() random keys before each query tile (unstructured: the
/// gather's least favourable case, no two selected keys need be adjacent).
TokenSelection random_token_selection(int n_kv_heads, int n, const TopKRule& rule, uint64_t seed) {
    TokenSelection sel;
    sel.n_kv_heads = n_kv_heads;
    sel.n_q_tiles = tile_count(n, kTile);
    sel.tile = kTile;
    for (int qt = 0; qt < sel.n_q_tiles; ++qt) sel.max_k = std::max(sel.max_k, topk_token_budget(rule, qt, kTile, n));
    sel.count.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles, 0);
    sel.keys.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);
    std::mt19937_64 gen(seed);
    std::vector<int32_t> cand;
    for (int h = 0; h < n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            const int k = topk_token_budget(rule, qt, kTile, n);
            cand.resize(static_cast<size_t>(qt) * kTile);
            std::iota(cand.begin(), cand.end(), 0);
            for (int i = 0; i < k; ++i) std::swap(cand[i], cand[i + gen() % (cand.size() - i)]);
            std::sort(cand.begin(), cand.begin() + k);
            std::copy(cand.begin(), cand.begin() + k, sel.list(h, qt));
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = k;
        }
    }
    return sel;
}

/// (query, key) pairs one query head attends to under a token selection, per KV head averaged.
double sparse_pairs(const TokenSelection& sel, int n) {
    double pairs = 0;
    for (int h = 0; h < sel.n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            const double rows = std::min(kTile, n - qt * kTile);
            pairs += sel.size(h, qt) * rows + rows * (rows + 1) / 2;
        }
    }
    return pairs / sel.n_kv_heads;
}

double causal_pairs(int n) {
    return static_cast<double>(n) * (n + 1) / 2;
}

/// The KV-head map of the reuse rows: KV head h reads the selection of head h + 1 (mod n), so no head reads its own.
std::vector<int32_t> reuse_head_map(int n_kv_heads) {
    std::vector<int32_t> head_map(n_kv_heads);
    for (int h = 0; h < n_kv_heads; ++h) head_map[h] = (h + 1) % n_kv_heads;
    return head_map;
}

/// Runs `body` once per iteration, timing it (wall clock); sets the speedup against (or records) the group's dense
/// time. body makes `calls` calls of the kernel (decode: one per copy of the cache); the time per call is the
/// iteration time of rows registered with UseManualTime. Returns seconds per call.
template <typename Body>
double timed_loop(benchmark::State& state, const std::string& group, bool is_dense, Body&& body, int calls = 1) {
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        state.SetIterationTime(dt / calls);
        seconds += dt;
    }
    const double per_iter = seconds / static_cast<double>(state.iterations()) / calls;
    if (is_dense) {
        g_dense_seconds[group] = per_iter;
    } else {
        const auto it = g_dense_seconds.find(group);
        state.counters["speedup"] = it == g_dense_seconds.end() ? 0.0 : it->second / per_iter;
    }
    state.counters["threads"] = omp_get_max_threads();
    return per_iter;
}

void set_gflops(benchmark::State& state, double flops, double seconds) {
    const double gflops = flops / seconds * 1e-9;
    state.counters["GFLOP/s"] = gflops;
    state.counters["pct_gemm"] = g_gemm_gflops > 0 ? 100.0 * gflops / g_gemm_gflops : 0.0;
}

void bench_gemm(benchmark::State& state) {
    const int n = 2048;
    Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
    Eigen::setNbThreads(omp_get_max_threads());
    c.noalias() = a * b;  // warm-up
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        c.noalias() = a * b;
        benchmark::DoNotOptimize(c.data());
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    g_gemm_gflops = 2.0 * n * n * n * static_cast<double>(state.iterations()) / seconds * 1e-9;
    state.counters["GFLOP/s"] = g_gemm_gflops;
    state.counters["threads"] = omp_get_max_threads();
}

/// Prefill variants of one (model, T): the dense row must be registered first.
enum class Prefill { kDense, kDenseWithMass, kDenseThenMass, kAnchor, kReuse, kTokenAnchor, kTokenReuse };

/// rule: the top-k rule of the sparse rows (the tile rows and token rows at "N pct" use the per-tile visible-context
/// rule, so both keep about N% of the causal pairs; the "paper" rows use the paper's k of the whole sequence).
void bench_prefill(benchmark::State& state, const ModelShape& m, int n, Prefill variant, TopKRule rule) {
    const float pct = rule.pct;
    Inputs in = make_inputs(m, n, n);
    const std::string group = std::string("prefill/") + m.name + "/T:" + std::to_string(n);
    const double dense_flops = 4.0 * m.head_dim * m.n_q_heads * causal_pairs(n);
    double flops = dense_flops;
    double density = 1;
    std::vector<float> lse(static_cast<size_t>(m.n_q_heads) * n);
    TileMass mass;
    TileSelection reuse_sel;
    PoolingScratch scratch;
    double seconds = 0;
    switch (variant) {
        case Prefill::kDense:
            seconds = timed_loop(state, group, true, [&] {
                attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), in.out.data());
            });
            break;
        case Prefill::kDenseWithMass:
            seconds = timed_loop(state, group, false, [&] {
                attn_dense_prefill_with_mass(in.shape, kTile, in.q.data(), in.k.data(), in.v.data(), in.out.data(),
                                             &mass);
            });
            break;
        case Prefill::kDenseThenMass:
            flops = dense_flops * 1.5;  // the second pass repeats Q.K
            seconds = timed_loop(state, group, false, [&] {
                attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), in.out.data(), lse.data());
                tile_mass_post_softmax(in.shape, kTile, in.q.data(), in.k.data(), lse.data(), &mass);
            });
            break;
        case Prefill::kAnchor:
        case Prefill::kTokenAnchor: {
            // Exactly what the Kascade policy runs for an anchor layer: scores-only pooling, top-k, then the layer's
            // own output over the selected tiles or keys.
            const SparseAttentionOptions options{
                .tile = kTile,
                .topk = rule,
                .granularity = variant == Prefill::kAnchor ? KeyGranularity::Tile : KeyGranularity::Token};
            LayerSelection sel;
            seconds = timed_loop(state, group, false, [&] {
                anchor_select_and_attend(in.shape, in.q.data(), in.k.data(), in.v.data(), options, &scratch, &sel,
                                         in.out.data());
            });
            density = (variant == Prefill::kAnchor ? sparse_pairs(sel.tiles, n) : sparse_pairs(sel.tokens, n)) /
                      causal_pairs(n);
            // Token anchors pool in a second pass over Q.K after the row statistics (2 x half a dense layer).
            flops = (variant == Prefill::kAnchor ? dense_flops / 2 : dense_flops) + dense_flops * density;
            break;
        }
        case Prefill::kTokenReuse: {
            const TokenSelection sel = random_token_selection(m.n_kv_heads, n, rule, 7);
            const std::vector<int32_t> head_map = reuse_head_map(m.n_kv_heads);
            seconds = timed_loop(state, group, false, [&] {
                attn_token_sparse_prefill(in.shape, kTile, in.q.data(), in.k.data(), in.v.data(), sel, head_map.data(),
                                          in.out.data());
            });
            density = sparse_pairs(sel, n) / causal_pairs(n);
            flops = dense_flops * density;
            break;
        }
        case Prefill::kReuse: {
            // A reuse layer reads another layer's selection through a KV-head map.
            reuse_sel = random_selection(m.n_kv_heads, n, pct, 7);
            const std::vector<int32_t> head_map = reuse_head_map(m.n_kv_heads);
            seconds = timed_loop(state, group, false, [&] {
                attn_sparse_prefill(in.shape, kTile, in.q.data(), in.k.data(), in.v.data(), reuse_sel, head_map.data(),
                                    in.out.data());
            });
            density = sparse_pairs(reuse_sel, n) / causal_pairs(n);
            flops = dense_flops * density;
            break;
        }
    }
    set_gflops(state, flops, seconds);
    state.counters["density"] = density;
    state.counters["flop_per_iter_G"] = flops * 1e-9;
}

/// The K and V a decode row reads, fp32 or BF16 (--kv-dtype), in as many copies as fill twice the last-level cache. A
/// real decode step's caches (every layer's, every sequence's of a batch) are far larger than that cache, so a call
/// finds its rows in memory; one copy would leave a 32K-key cache of the 1B shape (67 MB in BF16) in a large L3
/// between calls and time a step no model runs.
/// Held as KvCache holds a decode's layers (CacheAlignedVector: cache-line aligned rows, 2 MiB pages where the OS gives
/// them), so the rows time what the pipeline's decode reads.
struct DecodeCaches {
    int copies = 0;
    std::vector<CacheAlignedVector<float>> k32, v32;
    std::vector<CacheAlignedVector<uint16_t>> k16, v16;

    KvPtr k(int c) const { return k16.empty() ? KvPtr(k32[c].data()) : KvPtr::bf16(k16[c].data()); }
    KvPtr v(int c) const { return v16.empty() ? KvPtr(v32[c].data()) : KvPtr::bf16(v16[c].data()); }
};

DecodeCaches make_decode_caches(const ModelShape& m, int n, KvDType dtype) {
    const size_t count = static_cast<size_t>(n) * m.n_kv_heads * m.head_dim;
    const size_t bytes = 2 * count * (dtype == KvDType::BF16 ? sizeof(uint16_t) : sizeof(float));
    const size_t two_l3 = 2 * machine_limits::last_level_cache_bytes();
    DecodeCaches c;
    c.copies = static_cast<int>(std::max<size_t>(1, (two_l3 + bytes - 1) / bytes));
    const auto add = [&](uint64_t seed, auto& f32, auto& b16) {
        std::vector<float> values = machine_limits::uniform_floats(count, seed);
        if (dtype == KvDType::F32) {
            f32.emplace_back(values.begin(), values.end());
        } else {
            CacheAlignedVector<uint16_t>& bits = b16.emplace_back(count);
            for (size_t e = 0; e < count; ++e) bits[e] = bf16_from_float(values[e]);
        }
    };
    for (int copy = 0; copy < c.copies; ++copy) {
        add(2 + 2 * copy, c.k32, c.k16);
        add(3 + 2 * copy, c.v32, c.v16);
    }
    return c;
}

/// Decode rows: dense; tile-sparse over random tiles; and the Kascade decode steps as KascadeAttention runs them at
/// token granularity (tile 32, the paper's k rule at pct %): the anchor's scoring alone (decode_token_mass), the
/// anchor's whole step (anchor_select_and_attend: the scoring pass, the top-k and the selected keys' V rows) and a
/// reuse layer's step (attend_selection of the anchor's selection through a head map). kv: the cache's dtype; products:
/// MatmulPrecision::Bf16 (BF16 queries and weights, BF16 dot products) as `--matmul bf16` runs a BF16 cache, or exact.
/// Each iteration runs one call per copy of the cache (DecodeCaches), each with its own selection; the time and the
/// counters are per call.
enum class Decode { kDense, kSparse, kTokenMass, kTokenAnchor, kTokenReuse };

/// The name suffix of a decode row's cache dtype and products (bench_forward's `<matmul>/kv:<dtype>`); none for the
/// fp32 cache with exact products.
std::string decode_suffix(KvDType kv, MatmulPrecision products) {
    if (kv == KvDType::F32) return "";
    return products == MatmulPrecision::Bf16 ? "/bf16/kv:bf16" : "/exact/kv:bf16";
}

void bench_decode(benchmark::State& state, const ModelShape& m, int n, Decode variant, float pct, KvDType kv,
                  MatmulPrecision products) {
    Inputs in = make_inputs(m, 1, 1);  // the query; the cache is make_decode_caches'
    in.shape.n_k = in.shape.kv_stride = n;
    in.shape.products = products;
    const DecodeCaches caches = make_decode_caches(m, n, kv);
    const int copies = caches.copies;
    const std::string group = std::string("decode/") + m.name + "/T:" + std::to_string(n) + decode_suffix(kv, products);
    const double row_bytes = 2.0 * m.n_kv_heads * m.head_dim * (kv == KvDType::BF16 ? 2 : 4);  // K and V of a key
    double keys = n;
    const SparseAttentionOptions options{.tile = kTile, .topk = {0, pct, 128, KRule::Sequence}};
    PoolingScratch scratch;
    std::vector<LayerSelection> selections(copies);
    const AttnShape& shape = in.shape;
    const float* q = in.q.data();
    float* out = in.out.data();
    // Every call of an iteration, one per copy of the cache.
    const auto each_copy = [copies](auto&& call) {
        return [copies, call] {
            for (int c = 0; c < copies; ++c) call(c);
        };
    };
    const auto timed = [&](bool is_dense, auto&& body) { return timed_loop(state, group, is_dense, body, copies); };
    double seconds = 0;  // per call
    if (variant == Decode::kDense) {
        seconds = timed(true, each_copy([&](int c) { attn_dense_decode(shape, q, caches.k(c), caches.v(c), out); }));
    } else if (variant == Decode::kTokenMass) {
        seconds = timed(false, each_copy([&](int c) {
                            decode_token_mass(shape, kTile, q, caches.k(c), Pooling::PostSoftmax, &scratch.decode,
                                              &scratch.token_mass);
                        }));
        keys = n / 2.0;  // K only
    } else if (variant == Decode::kTokenAnchor || variant == Decode::kTokenReuse) {
        for (int c = 0; c < copies; ++c) select_decode_keys(shape, q, caches.k(c), options, &scratch, &selections[c]);
        const std::vector<int32_t> head_map = reuse_head_map(m.n_kv_heads);
        const bool anchor = variant == Decode::kTokenAnchor;
        seconds = timed(false, each_copy([&](int c) {
                            if (anchor) {
                                anchor_select_and_attend(shape, q, caches.k(c), caches.v(c), options, &scratch,
                                                         &selections[c], out);
                            } else {
                                attend_selection(shape, q, caches.k(c), caches.v(c), kTile, selections[c],
                                                 head_map.data(), out);
                            }
                        }));
        const double attended = selections[0].tokens.size(0, 0) + (n - (n - 1) / kTile * kTile);
        // K and V rows of the attended keys; an anchor reads every K row and the attended keys' V rows.
        keys = anchor ? (n + attended) / 2.0 : attended;
        state.counters["density"] = attended / n;
    } else {
        // The decode step's selection: the top-k rule's budget of random tiles before the query's tile.
        const int q_tile = (n - 1) / kTile;
        const int budget = topk_tile_budget(TopKRule{0, pct, 128, KRule::Visible}, q_tile, kTile, n);
        std::vector<int32_t> tiles, count(m.n_kv_heads, budget);
        for (int h = 0; h < m.n_kv_heads; ++h) {
            const TileSelection s = random_selection(1, (q_tile + 1) * kTile, pct, 11 + h);
            tiles.insert(tiles.end(), s.list(0, q_tile), s.list(0, q_tile) + budget);
        }
        keys = static_cast<double>(budget) * kTile + (n - q_tile * kTile);
        seconds = timed(false, each_copy([&](int c) {
                            attn_sparse_decode(shape, kTile, q, caches.k(c), caches.v(c), tiles.data(), count.data(),
                                               budget, nullptr, out);
                        }));
    }
    const double gbps = keys * row_bytes / seconds * 1e-9;
    state.counters["GB/s"] = gbps;
    state.counters["pct_bw"] = 100.0 * gbps / memory_gbps();
    state.counters["copies"] = copies;
    if (variant == Decode::kDense || variant == Decode::kSparse) state.counters["density"] = keys / n;
}

/// Registers one row, timed in milliseconds: wall clock per iteration, or (per_call) the time per call timed_loop
/// reports for the decode rows.
template <class Fn>
void register_row(const std::string& name, double min_time, bool per_call, Fn fn) {
    benchmark::internal::Benchmark* row =
        benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond)->MinTime(min_time);
    if (per_call) {
        row->UseManualTime();
    } else {
        row->UseRealTime();
    }
}

void register_all() {
    register_row("gemm/eigen/n:2048", 1.0, false, bench_gemm);
    for (const ModelShape& m : kModels) {
        for (int n : kPrefillLengths) {
            const std::string base = std::string("prefill/") + m.name + "/T:" + std::to_string(n) + "/";
            const auto add = [&](const std::string& name, Prefill v, float pct, KRule k_rule = KRule::Visible) {
                const TopKRule rule{0, pct, 128, k_rule};
                register_row(base + name, 0.2, false,
                             [=, &m](benchmark::State& s) { bench_prefill(s, m, n, v, rule); });
            };
            add("dense", Prefill::kDense, 0);
            add("dense_with_mass", Prefill::kDenseWithMass, 0);
            add("dense_then_mass", Prefill::kDenseThenMass, 0);
            add("anchor_10pct", Prefill::kAnchor, 10);
            add("reuse_10pct", Prefill::kReuse, 10);
            add("reuse_25pct", Prefill::kReuse, 25);
            add("token_anchor_10pct", Prefill::kTokenAnchor, 10);
            add("token_reuse_10pct", Prefill::kTokenReuse, 10);
            add("token_reuse_25pct", Prefill::kTokenReuse, 25);
            add("token_anchor_paper10pct", Prefill::kTokenAnchor, 10, KRule::Sequence);
            add("token_reuse_paper10pct", Prefill::kTokenReuse, 10, KRule::Sequence);
        }
        for (int n : kDecodeLengths) {
            const std::string base = std::string("decode/") + m.name + "/T:" + std::to_string(n) + "/";
            // fp32 cache with exact products: <variant>; BF16 cache: <variant>/<exact|bf16>/kv:bf16 (the names of
            // bench_forward's rows); each configuration's dense row first, the others' baseline.
            const std::pair<KvDType, MatmulPrecision> configs[] = {{KvDType::F32, MatmulPrecision::Exact},
                                                                   {KvDType::BF16, MatmulPrecision::Exact},
                                                                   {KvDType::BF16, MatmulPrecision::Bf16}};
            for (const auto& [kv, products] : configs) {
                const std::string suffix = decode_suffix(kv, products);
                const auto add = [&, kv, products](const std::string& name, Decode v, float pct) {
                    register_row(base + name + suffix, 0.3, true,
                                 [=, &m](benchmark::State& s) { bench_decode(s, m, n, v, pct, kv, products); });
                };
                add("dense", Decode::kDense, 0);
                add("sparse_10pct", Decode::kSparse, 10);
                add("sparse_25pct", Decode::kSparse, 25);
                add("token_mass", Decode::kTokenMass, 10);
                add("token_anchor_paper10pct", Decode::kTokenAnchor, 10);
                add("token_reuse_paper10pct", Decode::kTokenReuse, 10);
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
    benchmark::AddCustomContext("kascade_tile", std::to_string(kascade::kTile));
    // Other processes on the machine change the numbers: keep the load beside them.
    std::ifstream loadavg("/proc/loadavg");
    std::string load1;
    if (loadavg >> load1) benchmark::AddCustomContext("loadavg_1min_at_start", load1);
    kascade::register_all();
    kascade::run_benchmarks(results_dir);
    benchmark::Shutdown();
    return 0;
}
