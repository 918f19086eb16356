// bench/bench_matmul.cpp: speed of the linear-layer products (kernels/matmul.h) at the shapes of real models, as a
// share of the machine's limits measured in the same run (bench/machine_limits.h). Google Benchmark.
//
// Rows, selectable with --benchmark_filter:
//   limits/fp32_gemm/eigen, limits/fp32_gemm/matmul, limits/bf16_gemm/matmul, limits/memory_read
//       2048^3 products and a 1 GiB streaming read, all threads: the peaks the other rows are compared with
//       (measured on first use when these rows are filtered out).
//   limits/bf16_arith, limits/fp32_arith
//       multiply-add instructions on registers, all threads (machine_limits::arithmetic_peak_gflops): the ceiling
//       above the square products.
//   prefill/smollm2/n:<n>/<product>/<engine>
//       SmolLM2-135M's products for n tokens: qkv (576 -> 960, q/k/v fused), o (576 -> 576), gate_up (576 -> 3072,
//       fused), down (1536 -> 576), lm_head (576 -> 49152). Engines: `bf16` = BF16 weights with BF16 products
//       (`--matmul bf16`), `bf16_exact` = BF16 weights widened to fp32 (the default numerics), `f16` and `f32` =
//       weights of that type (fp32 products), and `eigen_f32` = bench/eigen_linear_baseline.h (the path before
//       kernels/matmul.h: one call per weight, fp32 Eigen).
//       Counters: GFLOP/s, pct_peak = GFLOP/s over the BF16 peak (bf16 rows) or the fp32 peak (the others: their
//       arithmetic is fp32).
//   decode/smollm2/<product>/<engine>, decode/llama3.2_1b/B:<b>/<product>/<engine>
//       n = 1 on the same shapes, and n = b (a batched decode step: 1 or 8 sequences) on Llama-3.2-1B's (up
//       2048 -> 8192, down 8192 -> 2048, lm_head 2048 -> 128256) with BF16 weights.
//       Each iteration uses the next of several copies of the weights (at least twice the L3 in all), so the weights
//       come from memory as in a real decode step. Counters: GB/s of weights read, pct_bw = GB/s over the measured
//       memory bandwidth, GFLOP/s, and pct_bound = the row's bound (the longer of reading the weights once at the
//       measured bandwidth and the arithmetic at the GEMM peak of its products) over its time.
// Every row also reports `threads`; times are wall clock.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_results_reporter.h"
#include "bench/eigen_linear_baseline.h"
#include "bench/machine_limits.h"
#include "kernels/matmul.h"

namespace kascade {
namespace {

namespace ml = machine_limits;

/// One linear product of a model; `fused` outputs share one call (q/k/v, gate/up).
struct Product {
    const char* name;
    int cols;
    std::vector<int> rows;  ///< per fused weight
};

const std::vector<Product>& smollm2_products() {
    static const std::vector<Product> products = {{"qkv", 576, {576, 192, 192}},
                                                  {"o", 576, {576}},
                                                  {"gate_up", 576, {1536, 1536}},
                                                  {"down", 1536, {576}},
                                                  {"lm_head", 576, {49152}}};
    return products;
}

const std::vector<Product>& llama1b_products() {
    static const std::vector<Product> products = {
        {"up", 2048, {8192}}, {"down", 8192, {2048}}, {"lm_head", 2048, {128256}}};
    return products;
}

int total_rows(const Product& p) {
    int rows = 0;
    for (int r : p.rows) rows += r;
    return rows;
}

enum class Engine { Bf16, Bf16Exact, F16, F32, EigenF32 };

const char* engine_name(Engine e) {
    switch (e) {
        case Engine::Bf16:
            return "bf16";
        case Engine::Bf16Exact:
            return "bf16_exact";
        case Engine::F16:
            return "f16";
        case Engine::F32:
            return "f32";
        case Engine::EigenF32:
            return "eigen_f32";
    }
    return "?";
}

MatrixType engine_type(Engine e) {
    return e == Engine::Bf16 || e == Engine::Bf16Exact ? MatrixType::BF16
           : e == Engine::F16                          ? MatrixType::F16
                                                       : MatrixType::F32;
}

MatmulPrecision engine_precision(Engine e) {
    return e == Engine::Bf16 ? MatmulPrecision::Bf16 : MatmulPrecision::Exact;
}

/// The measured limits, from the limits/ rows or measured on first use.
struct Limits {
    double fp32_eigen = 0, fp32_matmul = 0, bf16 = 0, bandwidth = 0;
    double fp32() {
        if (fp32_eigen == 0) fp32_eigen = ml::eigen_fp32_gemm_gflops();
        if (fp32_matmul == 0) fp32_matmul = ml::matmul_gemm_gflops(MatrixType::F32, MatmulPrecision::Exact);
        return std::max(fp32_eigen, fp32_matmul);
    }
    double bf16_peak() {
        return bf16 > 0 ? bf16 : (bf16 = ml::matmul_gemm_gflops(MatrixType::BF16, MatmulPrecision::Bf16));
    }
    double memory() { return bandwidth > 0 ? bandwidth : (bandwidth = ml::memory_read_gbps()); }
};
Limits g_limits;

/// Runs body() once per iteration and returns the mean wall time per iteration in seconds.
template <typename Body>
double timed(benchmark::State& state, Body&& body) {
    body();  // warm-up (page faults, caches)
    double seconds = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return seconds / static_cast<double>(state.iterations());
}

void bench_limit_gemm(benchmark::State& state, MatrixType type, bool eigen) {
    // BF16 weights are timed with BF16 products: the rate vdpbf16ps gives, the BF16 peak.
    const MatmulPrecision precision = type == MatrixType::BF16 ? MatmulPrecision::Bf16 : MatmulPrecision::Exact;
    double gflops = 0;
    for (auto _ : state) gflops = eigen ? ml::eigen_fp32_gemm_gflops() : ml::matmul_gemm_gflops(type, precision);
    (eigen ? g_limits.fp32_eigen : type == MatrixType::F32 ? g_limits.fp32_matmul : g_limits.bf16) = gflops;
    state.counters["GFLOP/s"] = gflops;
    state.counters["threads"] = omp_get_max_threads();
}

void bench_limit_arithmetic(benchmark::State& state, bool bf16) {
    double gflops = 0;
    for (auto _ : state) gflops = ml::arithmetic_peak_gflops(bf16);
    state.counters["GFLOP/s"] = gflops;
    state.counters["threads"] = omp_get_max_threads();
}

void bench_limit_memory(benchmark::State& state) {
    double gbps = 0;
    for (auto _ : state) gbps = ml::memory_read_gbps();
    g_limits.bandwidth = gbps;
    state.counters["GB/s"] = gbps;
    state.counters["threads"] = omp_get_max_threads();
}

/// The weights of one product (one matrix per fused output) and the calls that run it.
struct ProductRun {
    std::vector<std::unique_ptr<ml::OwnedMatrix>> weights;
    std::vector<float> y;
    int y_stride;

    ProductRun(const Product& p, Engine engine, int n, uint64_t seed) : y_stride(total_rows(p)) {
        for (size_t k = 0; k < p.rows.size(); ++k) {
            weights.push_back(std::make_unique<ml::OwnedMatrix>(engine_type(engine), p.rows[k], p.cols, seed + k));
        }
        y.resize(static_cast<size_t>(n) * y_stride);
    }
    size_t weight_bytes() const {
        size_t bytes = 0;
        for (const auto& w : weights) bytes += w->bytes.size();
        return bytes;
    }
    void run(const float* x, int n, Engine engine) {
        if (engine == Engine::EigenF32) {  // today's runtime path: one call per weight into its own buffer
            int col0 = 0;
            for (const auto& w : weights) {
                bench::eigen_linear(x, static_cast<const float*>(w->view.data), nullptr,
                                    y.data() + static_cast<size_t>(col0) * n, n, w->view.cols, w->view.rows);
                col0 += w->view.rows;
            }
            return;
        }
        std::vector<MatmulTarget> targets;
        int col0 = 0;
        for (const auto& w : weights) {
            targets.push_back({w->view, nullptr, y.data() + col0, y_stride});
            col0 += w->view.rows;
        }
        matmul(x, n, targets, engine_precision(engine));
    }
};

void bench_prefill(benchmark::State& state, const Product& p, int n, Engine engine) {
    ProductRun product(p, engine, n, 10);
    const std::vector<float> x = ml::uniform_floats(static_cast<size_t>(n) * p.cols, 5);
    const double seconds = timed(state, [&] { product.run(x.data(), n, engine); });
    const double gflops = 2.0 * n * p.cols * total_rows(p) / seconds * 1e-9;
    const double peak = engine == Engine::Bf16 ? g_limits.bf16_peak() : g_limits.fp32();
    state.counters["GFLOP/s"] = gflops;
    state.counters["pct_peak"] = 100.0 * gflops / peak;
    state.counters["threads"] = omp_get_max_threads();
}

void bench_decode(benchmark::State& state, const Product& p, int n, Engine engine) {
    const size_t min_bytes = 2 * ml::last_level_cache_bytes();  // each call reads its weights from memory
    std::vector<std::unique_ptr<ProductRun>> copies;
    copies.push_back(std::make_unique<ProductRun>(p, engine, n, 20));
    const size_t bytes = copies[0]->weight_bytes();
    while (copies.size() * bytes < min_bytes)
        copies.push_back(std::make_unique<ProductRun>(p, engine, n, 20 + copies.size()));
    const std::vector<float> x = ml::uniform_floats(static_cast<size_t>(n) * p.cols, 6);
    size_t next = 0;
    const double seconds = timed(state, [&] {
        copies[next]->run(x.data(), n, engine);
        next = (next + 1) % copies.size();
    });
    const double gbps = static_cast<double>(bytes) / seconds * 1e-9;
    const double flops = 2.0 * n * p.cols * total_rows(p);
    const double peak = engine == Engine::Bf16 ? g_limits.bf16_peak() : g_limits.fp32();
    // A batch's call can go no faster than reading its weights once or doing its arithmetic at the GEMM rate.
    const double bound_seconds = std::max(static_cast<double>(bytes) / (g_limits.memory() * 1e9), flops / (peak * 1e9));
    state.counters["GB/s"] = gbps;
    state.counters["pct_bw"] = 100.0 * gbps / g_limits.memory();
    state.counters["GFLOP/s"] = flops / seconds * 1e-9;
    state.counters["pct_bound"] = 100.0 * bound_seconds / seconds;
    state.counters["threads"] = omp_get_max_threads();
}

void register_all() {
    auto limit = [](const char* name, auto fn, auto... args) {
        benchmark::RegisterBenchmark(name, fn, args...)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
    };
    limit("limits/fp32_gemm/eigen", bench_limit_gemm, MatrixType::F32, true);
    limit("limits/fp32_gemm/matmul", bench_limit_gemm, MatrixType::F32, false);
    limit("limits/bf16_gemm/matmul", bench_limit_gemm, MatrixType::BF16, false);
    limit("limits/memory_read", bench_limit_memory);
    limit("limits/bf16_arith", bench_limit_arithmetic, true);
    limit("limits/fp32_arith", bench_limit_arithmetic, false);

    const Engine prefill_engines[] = {Engine::Bf16, Engine::Bf16Exact, Engine::F16, Engine::F32, Engine::EigenF32};
    for (int n : {512, 2048}) {
        for (const Product& p : smollm2_products()) {
            for (Engine e : prefill_engines) {
                const std::string name = "prefill/smollm2/n:" + std::to_string(n) + "/" + p.name + "/" + engine_name(e);
                benchmark::RegisterBenchmark(name.c_str(), bench_prefill, p, n, e)
                    ->Unit(benchmark::kMillisecond)
                    ->MinTime(0.5)
                    ->UseRealTime();
            }
        }
    }
    for (const Product& p : smollm2_products()) {
        for (Engine e : prefill_engines) {
            const std::string name = std::string("decode/smollm2/") + p.name + "/" + engine_name(e);
            benchmark::RegisterBenchmark(name.c_str(), bench_decode, p, 1, e)
                ->Unit(benchmark::kMicrosecond)
                ->MinTime(0.5)
                ->UseRealTime();
        }
    }
    for (int batch : {1, 8}) {
        for (const Product& p : llama1b_products()) {
            for (Engine e : {Engine::Bf16, Engine::Bf16Exact}) {
                const std::string name =
                    "decode/llama3.2_1b/B:" + std::to_string(batch) + "/" + p.name + "/" + engine_name(e);
                benchmark::RegisterBenchmark(name.c_str(), bench_decode, p, batch, e)
                    ->Unit(benchmark::kMicrosecond)
                    ->MinTime(0.5)
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
    benchmark::AddCustomContext("matmul_path", kascade::matmul_path());
    kascade::register_all();
    kascade::run_benchmarks(results_dir);
    benchmark::Shutdown();
    return 0;
}
