// bench/machine_limits.h: the machine's practical limits, measured in the running process so that a benchmark can
// state its speed as a share of them (bench_matmul, bench_forward):
//   fp32 GEMM peak   a 2048^3 product, the faster of Eigen (one row block per thread, as pipeline/runtime/linear.cpp
//                    runs it) and kascade's matmul with F32 weights
//   BF16 GEMM peak   a 2048^3 product by kascade's matmul with BF16 weights and BF16 products (MatmulPrecision::Bf16:
//                    vdpbf16ps where available), the numerics of `--matmul bf16`
//   memory bandwidth a streaming read of 1 GiB (far beyond the L3) by all threads
//   arithmetic peaks the instruction throughput with no memory traffic: every thread issuing independent 512-bit
//                    vdpbf16ps (BF16) or vfmadd (fp32) on registers, 256-bit vfmadd where the build has AVX2 but no
//                    AVX-512; the ceiling no product can pass, reported beside the square products (0 where the build
//                    has no such instruction: BF16 without AVX512-BF16, fp32 without FMA)
//   idle-region write the cost of the first write to a 2 MiB region that went unwritten for a third of a second, a
//                    decode step's interval (one thread; the mean, not a peak): 4-6 us on the 2-vCPU Firecracker VMs,
//                    where back-to-back writes to the same regions take 0.04 us (idle_region_write_us)
// Each figure but the last is the best of a few repetitions after a warm-up: a peak, not a typical value. All but
// the last use omp_get_max_threads() threads. Header-only: bench/ builds every .cpp as its own program.
#pragma once

#include <omp.h>
#include <unistd.h>

#include <immintrin.h>
#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/cache_aligned.h"
#include "kernels/matmul.h"

namespace kascade::machine_limits {

constexpr int kGemmSize = 2048;
constexpr size_t kStreamBytes = size_t{1} << 30;
constexpr int kRepetitions = 5;

/// The last-level cache's size in bytes (`getconf LEVEL3_CACHE_SIZE`; 32 MiB where the system does not say). A row
/// that must read from memory, as a decode step does, rotates through copies of its data filling twice this: the L3
/// is 32 MB on one development machine and 260 MB on another.
inline size_t last_level_cache_bytes() {
    const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return bytes > 0 ? static_cast<size_t>(bytes) : size_t{32} << 20;
}

/// Best wall time of `reps` runs of body() after one warm-up run, in seconds.
template <typename Body>
double best_seconds(int reps, Body&& body) {
    body();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        body();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

/// Deterministic values in [-1, 1).
inline std::vector<float> uniform_floats(size_t count, uint64_t seed) {
    std::vector<float> v(count);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& e : v) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        e = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
    }
    return v;
}

/// A weight matrix [rows][cols] of the given type with values in [-1, 1) (BF16/F16 rounded from fp32).
struct OwnedMatrix {
    std::vector<uint8_t> bytes;
    MatrixView view;

    OwnedMatrix(MatrixType type, int rows, int cols, uint64_t seed) {
        const size_t count = static_cast<size_t>(rows) * cols;
        const std::vector<float> values = uniform_floats(count, seed);
        bytes.resize(count * matrix_type_size(type));
        if (type == MatrixType::F32) {
            std::memcpy(bytes.data(), values.data(), bytes.size());
        } else {
            auto* out = reinterpret_cast<uint16_t*>(bytes.data());
            for (size_t k = 0; k < count; ++k)
                out[k] = type == MatrixType::BF16 ? bf16_bits(values[k]) : f16_bits(values[k]);
        }
        view = MatrixView{type, bytes.data(), rows, cols};
    }

    /// Truncating conversions: any value of the type will do for timing.
    static uint16_t bf16_bits(float x) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        return static_cast<uint16_t>(u >> 16);
    }
    /// |x| < 1 as a normal or zero half (exponent clamped at 2^-14), truncated.
    static uint16_t f16_bits(float x) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        const uint32_t sign = (u >> 16) & 0x8000u;
        const int exponent = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
        if (exponent <= 0) return static_cast<uint16_t>(sign);
        return static_cast<uint16_t>(sign | (exponent << 10) | ((u >> 13) & 0x3ffu));
    }
};

/// y = x W^T, fp32, Eigen, one block of rows of x per thread with Eigen itself single-threaded (pipeline/runtime/
/// linear.cpp's scheme).
inline void eigen_matmul(const float* x, int n, const float* w, int rows, int cols, float* y) {
    using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::setNbThreads(1);
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int r0 = static_cast<int>(static_cast<long>(n) * t / nt),
                  r1 = static_cast<int>(static_cast<long>(n) * (t + 1) / nt);
        if (r0 < r1) {
            Eigen::Map<const RowMatrix> xm(x + static_cast<size_t>(r0) * cols, r1 - r0, cols);
            Eigen::Map<const RowMatrix> wm(w, rows, cols);
            Eigen::Map<RowMatrix> ym(y + static_cast<size_t>(r0) * rows, r1 - r0, rows);
            ym.noalias() = xm * wm.transpose();
        }
    }
}

/// GFLOP/s of a size^3 fp32 product by Eigen.
inline double eigen_fp32_gemm_gflops(int size = kGemmSize) {
    const std::vector<float> x = uniform_floats(static_cast<size_t>(size) * size, 1),
                             w = uniform_floats(static_cast<size_t>(size) * size, 2);
    std::vector<float> y(static_cast<size_t>(size) * size);
    const double seconds =
        best_seconds(kRepetitions, [&] { eigen_matmul(x.data(), size, w.data(), size, size, y.data()); });
    return 2.0 * size * size * static_cast<double>(size) / seconds * 1e-9;
}

/// GFLOP/s of a size^3 product by kascade's matmul with weights of the given type.
inline double matmul_gemm_gflops(MatrixType type, MatmulPrecision precision, int size = kGemmSize) {
    const OwnedMatrix w(type, size, size, 3);
    const std::vector<float> x = uniform_floats(static_cast<size_t>(size) * size, 4);
    std::vector<float> y(static_cast<size_t>(size) * size);
    const double seconds =
        best_seconds(kRepetitions, [&] { matmul(x.data(), size, w.view, nullptr, y.data(), precision); });
    return 2.0 * size * size * static_cast<double>(size) / seconds * 1e-9;
}

/// GB/s of a streaming read of `bytes` by all threads (each reads a contiguous share; pages first touched by the
/// thread that reads them).
inline double memory_read_gbps(size_t bytes = kStreamBytes) {
    const size_t count = bytes / sizeof(uint64_t);
    std::unique_ptr<uint64_t[]> buffer(new uint64_t[count]);
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < count; ++k) buffer[k] = k;
    uint64_t checksum = 0;
    const double seconds = best_seconds(kRepetitions, [&] {
        uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (size_t k = 0; k < count; ++k) sum += buffer[k];
        checksum += sum;
    });
    // The checksum is used so that the reads cannot be optimised away.
    return checksum == 0 ? 0.0 : static_cast<double>(bytes) / seconds * 1e-9;
}

/// GFLOP/s of independent multiply-add instructions on registers by all threads: `fma(acc, x, y)` on kAccumulators
/// accumulators of type Acc per step, with inputs x and y of type Input, `flops_per_instruction` each.
template <typename Acc, typename Input, typename Fma>
double register_fma_gflops(double flops_per_instruction, Input x0, Input y, Fma fma) {
    constexpr int kAccumulators = 12;  // more than latency x issue width: the loop is throughput-bound
    constexpr long kSteps = 20'000'000;
    float sink = 0;
    const double seconds = best_seconds(3, [&] {
#pragma omp parallel reduction(+ : sink)
        {
            // Distinct starting values: identical chains would be merged into one by the compiler.
            constexpr int kLanes = sizeof(Acc) / sizeof(float);
            Acc acc[kAccumulators];
            for (int i = 0; i < kAccumulators; ++i) {
                float start[kLanes];
                std::fill(start, start + kLanes, static_cast<float>(i));
                std::memcpy(&acc[i], start, sizeof(Acc));
            }
            Input x = x0;
            for (long k = 0; k < kSteps; ++k) {
#pragma GCC unroll 12
                for (int i = 0; i < kAccumulators; ++i) acc[i] = fma(acc[i], x, y);
                // The input is not loop-invariant to the compiler, so it keeps every instruction.
                asm volatile("" : "+v"(x));
            }
            // Summed through memory: GCC 12's _mm512_reduce_add_ps warns of an uninitialised temporary.
            float lanes[kLanes];
            for (const Acc& a : acc) {
                std::memcpy(lanes, &a, sizeof(Acc));
                for (float lane : lanes) sink += lane;
            }
        }
    });
    const double flops = flops_per_instruction * kAccumulators * static_cast<double>(kSteps) * omp_get_max_threads();
    // The sink is used so that the loop cannot be optimised away.
    return sink == 0.12345f ? 0.0 : flops / seconds * 1e-9;
}

/// GFLOP/s of independent multiply-add instructions on registers by all threads; `bf16`: vdpbf16ps (32 products per
/// instruction), else fp32 vfmadd (16 with AVX-512, 8 with AVX2). 0 when the build has no such instruction.
inline double arithmetic_peak_gflops(bool bf16) {
#if defined(__AVX512BF16__)
    if (bf16) {
        const __m512i x = _mm512_set1_epi16(0x3a83);  // 1e-3 in BF16
        return register_fma_gflops<__m512>(64.0, x, x, [](__m512 acc, __m512i a, __m512i b) {
            return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
        });
    }
#endif
    if (bf16) return 0.0;
#if defined(__AVX512F__)
    const __m512 x = _mm512_set1_ps(1e-3f);
    return register_fma_gflops<__m512>(32.0, x, x,
                                       [](__m512 acc, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, acc); });
#elif defined(__FMA__)
    const __m256 x = _mm256_set1_ps(1e-3f);
    return register_fma_gflops<__m256>(16.0, x, x,
                                       [](__m256 acc, __m256 a, __m256 b) { return _mm256_fmadd_ps(a, b, acc); });
#else
    return 0.0;
#endif
}

/// Microseconds the first write to a 2 MiB region (a huge page of the caches) takes once nothing has written to it for
/// 330 ms. On the 2-vCPU Firecracker VM this is 4-6 us per region where the same writes back to back take 0.04 us,
/// with no page fault in the guest: the behaviour of a hypervisor that tracks the memory its guest writes and traps
/// the next write to each region after it write-protects them again (bench/README.md, "The first write to an idle
/// region"). A decode step writes the new position's keys and values into each KV head's part of the cache
/// (head-major, one region per head at long contexts), so there it pays this for every (sequence, layer, K or V,
/// head): bench_forward's idle_write_ms beside rope_kv_ms.
inline double idle_region_write_us() {
    constexpr size_t kRegion = CacheLineAllocator<char>::kHugePageBytes;
    constexpr int kRegions = 32, kRounds = 8;
    CacheAlignedVector<char> buffer(kRegion * kRegions, 1);  // written once, on huge pages as the caches are
    volatile char* bytes = buffer.data();
    double seconds = 0;
    for (int round = 0; round < kRounds; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(330));
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < kRegions; ++r) bytes[r * kRegion + round * 64] = static_cast<char>(round);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return seconds / (kRounds * kRegions) * 1e6;
}

struct MachineLimits {
    double fp32_gemm_gflops = 0;   ///< best of Eigen and matmul(F32)
    double bf16_gemm_gflops = 0;   ///< matmul(BF16 weights, BF16 products)
    double memory_gbps = 0;        ///< streaming read bandwidth
    double bf16_arith_gflops = 0;  ///< vdpbf16ps throughput on registers
    double fp32_arith_gflops = 0;  ///< vfmadd throughput on registers
    double idle_write_us = 0;      ///< the first write to a 2 MiB region left idle for a decode step's interval
    int threads = 0;
};

/// All the limits (about 9 s on 2 cores, 2.6 of them asleep).
inline MachineLimits measure() {
    MachineLimits limits;
    limits.fp32_gemm_gflops =
        std::max(eigen_fp32_gemm_gflops(), matmul_gemm_gflops(MatrixType::F32, MatmulPrecision::Exact));
    limits.bf16_gemm_gflops = matmul_gemm_gflops(MatrixType::BF16, MatmulPrecision::Bf16);
    limits.memory_gbps = memory_read_gbps();
    limits.bf16_arith_gflops = arithmetic_peak_gflops(true);
    limits.fp32_arith_gflops = arithmetic_peak_gflops(false);
    limits.idle_write_us = idle_region_write_us();
    limits.threads = omp_get_max_threads();
    return limits;
}

}  // namespace kascade::machine_limits
