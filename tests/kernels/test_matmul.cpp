// tests/kernels/test_matmul.cpp: y = x W^T (+ b) with F32 / BF16 / F16 weights against the double-precision twin
// (kernels/reference/matmul_reference.h), over odd shapes, bias or none, fused targets with row strides, and the
// invariances the kernel promises: bitwise the same result for any thread count and for a row alone or in a batch.
// Every output buffer carries guard values around the written elements to catch overruns.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/reference/matmul_reference.h"

namespace kascade {
namespace {

constexpr double kMatmulTolerance = 1e-5;  ///< max |y - ref| / max |ref| (acceptance bound)
constexpr float kGuard = -12345.678f;      ///< written around the outputs; must survive every call
/// Every compiled numerics: each weight dtype exact, and BF16 weights with BF16-rounded activations.
struct Variant {
    MatrixType type;
    MatmulPrecision precision;
};
constexpr Variant kVariants[] = {{MatrixType::F32, MatmulPrecision::Exact},
                                 {MatrixType::BF16, MatmulPrecision::Exact},
                                 {MatrixType::BF16, MatmulPrecision::Bf16},
                                 {MatrixType::F16, MatmulPrecision::Exact}};

std::vector<float> uniform_floats(size_t count, uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-scale, scale);
    std::vector<float> v(count);
    for (float& e : v) e = uniform(rng);
    return v;
}

/// A weight matrix with random values, stored at a deliberately odd (but legal) alignment: 2 bytes past a 64-byte
/// boundary for BF16/F16, 4 bytes for F32, as tensors in a memory-mapped file may be.
struct Weights {
    std::vector<uint8_t> storage;
    MatrixView view;

    Weights(MatrixType type, int rows, int cols, uint64_t seed) {
        const size_t elem = matrix_type_size(type), count = static_cast<size_t>(rows) * cols;
        storage.resize(count * elem + 128);
        const size_t offset = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 + elem;
        uint8_t* data = storage.data() + offset;
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        for (size_t k = 0; k < count; ++k) {
            const float value = uniform(rng);
            if (type == MatrixType::F32) {
                std::memcpy(data + 4 * k, &value, 4);
            } else {
                // BF16: the top half of the float (truncation: any BF16 pattern will do). F16: sign, exponent
                // 2^-6..2^1 and 10 random mantissa bits.
                uint32_t bits;
                std::memcpy(&bits, &value, 4);
                const uint64_t r = rng();
                const uint16_t half =
                    static_cast<uint16_t>(((r & 1) << 15) | ((9 + (r >> 1) % 8) << 10) | (r >> 8 & 0x3ff));
                const uint16_t stored = type == MatrixType::BF16 ? static_cast<uint16_t>(bits >> 16) : half;
                std::memcpy(data + 2 * k, &stored, 2);
            }
        }
        view = MatrixView{type, data, rows, cols};
    }
    void set(int row, int col, uint16_t bits) { std::memcpy(element(row, col), &bits, 2); }
    void set(int row, int col, float value) { std::memcpy(element(row, col), &value, 4); }
    uint8_t* element(int row, int col) {
        return static_cast<uint8_t*>(const_cast<void*>(view.data)) +
               (static_cast<size_t>(row) * view.cols + col) * matrix_type_size(view.type);
    }
};

/// An output matrix [n][stride] inside guard values: the padding columns and kMargin floats on each side.
struct GuardedOutput {
    static constexpr int kMargin = 64;
    int n, cols, stride;
    std::vector<float> buffer;
    GuardedOutput(int n, int cols, int stride)
        : n(n), cols(cols), stride(stride), buffer(static_cast<size_t>(n) * stride + 2 * kMargin, kGuard) {}
    float* data() { return buffer.data() + kMargin; }
    float at(int i, int j) const { return buffer[kMargin + static_cast<size_t>(i) * stride + j]; }
    /// Whether every float outside [i][col0, col0 + width) is still a guard.
    bool guards_intact(int col0, int width) const {
        for (size_t k = 0; k < buffer.size(); ++k) {
            const long inner = static_cast<long>(k) - kMargin;
            const bool written = inner >= 0 && inner < static_cast<long>(n) * stride && inner % stride >= col0 &&
                                 inner % stride < col0 + width;
            if (!written && buffer[k] != kGuard) return false;
        }
        return true;
    }
};

/// max |y - ref| / max |ref| over the block [n][cols] at column col0 of `y`.
double relative_error(const GuardedOutput& y, int col0, const std::vector<double>& ref, int n, int cols) {
    double max_diff = 0, max_ref = 0;
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < cols; ++j) {
            const double r = ref[static_cast<size_t>(i) * cols + j];
            max_diff = std::max(max_diff, std::abs(y.at(i, col0 + j) - r));
            if (std::isnan(y.at(i, col0 + j))) max_diff = INFINITY;
            max_ref = std::max(max_ref, std::abs(r));
        }
    }
    return max_ref > 0 ? max_diff / max_ref : max_diff;
}

std::string case_name(MatrixType type, int n, int cols, int rows, bool bias,
                      MatmulPrecision precision = MatmulPrecision::Exact) {
    return std::string("matmul(") + matrix_type_name(type) + "," + std::string(mode_name(precision)) +
           ",n=" + std::to_string(n) + ",cols=" + std::to_string(cols) + ",rows=" + std::to_string(rows) +
           (bias ? ",bias" : "") + ")";
}

/// Runs `body` with the OpenMP thread count set to `threads`, then restores it.
template <typename Body>
void with_threads(int threads, Body&& body) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    body();
    omp_set_num_threads(saved);
}

struct Shape {
    int n, cols, rows;
};

// A grid of odd small shapes (every n x cols x rows combination) plus the large ones the models use; the reference
// is O(n cols rows) in double, and the suite must stay fast under sanitizers.
std::vector<Shape> shapes() {
    std::vector<Shape> s;
    for (int n : {1, 3, 8, 17, 129})
        for (int cols : {8, 72, 576})
            for (int rows : {1, 7, 192}) s.push_back({n, cols, rows});
    s.push_back({512, 576, 576});
    s.push_back({512, 72, 1000});
    s.push_back({17, 1536, 1000});
    s.push_back({3, 1536, 576});
    s.push_back({129, 1536, 192});
    s.push_back({512, 8, 7});
    s.push_back({1, 1536, 1000});
    s.push_back({5, 33, 13});    // neither dimension a multiple of any vector width
    s.push_back({7, 1100, 40});  // a decode batch over three column blocks, the last one masked
    return s;
}

TEST(Matmul, MatchesReference) {
    for (auto [type, precision] : kVariants) {
        uint64_t seed = 1;
        for (const Shape& shape : shapes()) {
            const bool with_bias = seed % 2 == 0;
            SCOPED_TRACE(case_name(type, shape.n, shape.cols, shape.rows, with_bias, precision));
            const Weights w(type, shape.rows, shape.cols, ++seed);
            const std::vector<float> x = uniform_floats(static_cast<size_t>(shape.n) * shape.cols, ++seed);
            const std::vector<float> bias = uniform_floats(shape.rows, ++seed);
            const float* b = with_bias ? bias.data() : nullptr;
            GuardedOutput y(shape.n, shape.rows, shape.rows);
            matmul(x.data(), shape.n, w.view, b, y.data(), precision);
            const std::vector<double> ref = reference::matmul(x.data(), shape.n, w.view, b, precision);
            EXPECT_LE(relative_error(y, 0, ref, shape.n, shape.rows), kMatmulTolerance);
            EXPECT_TRUE(y.guards_intact(0, shape.rows));
        }
    }
}

TEST(Matmul, FusedTargetsWithStrides) {
    // q/k/v-like fused call: three weights (mixed types) write side by side into one [n][stride] buffer, with unused
    // columns between and after them; with 33 rows, and with 6 (a decode batch: its work units cross the targets).
    for (const int n : {33, 6}) {
        const int cols = 72, stride = 200;
        const int rows[3] = {64, 19, 19}, col0[3] = {0, 70, 120};
        const MatrixType types[3] = {MatrixType::BF16, MatrixType::F16, MatrixType::F32};
        const std::vector<float> x = uniform_floats(static_cast<size_t>(n) * cols, 5);
        std::vector<Weights> weights;
        std::vector<std::vector<float>> biases;
        for (int t = 0; t < 3; ++t) {
            weights.emplace_back(types[t], rows[t], cols, 10 + t);
            biases.push_back(uniform_floats(rows[t], 20 + t));
        }
        for (MatmulPrecision precision : {MatmulPrecision::Exact, MatmulPrecision::Bf16}) {
            GuardedOutput y(n, stride, stride);
            std::vector<MatmulTarget> targets;
            for (int t = 0; t < 3; ++t) {
                targets.push_back({weights[t].view, t == 1 ? nullptr : biases[t].data(), y.data() + col0[t], stride});
            }
            matmul(x.data(), n, targets, precision);
            for (int t = 0; t < 3; ++t) {
                SCOPED_TRACE(case_name(types[t], n, cols, rows[t], t != 1, precision));
                const std::vector<double> ref =
                    reference::matmul(x.data(), n, weights[t].view, t == 1 ? nullptr : biases[t].data(), precision);
                EXPECT_LE(relative_error(y, col0[t], ref, n, rows[t]), kMatmulTolerance);
            }
            // Guards: everything but the three written column ranges.
            GuardedOutput expected = y;
            for (int i = 0; i < n; ++i)
                for (int t = 0; t < 3; ++t)
                    for (int j = 0; j < rows[t]; ++j)
                        expected.buffer[GuardedOutput::kMargin + i * stride + col0[t] + j] = kGuard;
            EXPECT_TRUE(expected.guards_intact(0, 0));
        }
    }
}

TEST(Matmul, FusedEqualsSeparateCalls) {
    // Fusing changes the work split, not the arithmetic: bitwise the same as one call per weight.
    const int n = 129, cols = 576;
    const std::vector<float> x = uniform_floats(static_cast<size_t>(n) * cols, 7);
    const Weights gate(MatrixType::BF16, 1536, cols, 8), up(MatrixType::BF16, 1536, cols, 9);
    std::vector<float> fused(static_cast<size_t>(n) * 3072), g(static_cast<size_t>(n) * 1536), u(g.size());
    const MatmulTarget targets[2] = {{gate.view, nullptr, fused.data(), 3072},
                                     {up.view, nullptr, fused.data() + 1536, 3072}};
    matmul(x.data(), n, targets);
    matmul(x.data(), n, gate.view, nullptr, g.data());
    matmul(x.data(), n, up.view, nullptr, u.data());
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(&fused[i * 3072], &g[i * 1536], 1536 * 4), 0) << "gate row " << i;
        ASSERT_EQ(std::memcmp(&fused[i * 3072 + 1536], &u[i * 1536], 1536 * 4), 0) << "up row " << i;
    }
}

TEST(Matmul, ThreadCountDoesNotChangeResults) {
    for (const Variant& variant : kVariants) {
        // Variables, not a structured binding: clang 14 cannot capture a binding in the lambdas below.
        const MatrixType type = variant.type;
        const MatmulPrecision precision = variant.precision;
        for (const Shape& shape : {Shape{129, 576, 1000}, Shape{1, 1536, 1000}, Shape{512, 72, 7}}) {
            SCOPED_TRACE(case_name(type, shape.n, shape.cols, shape.rows, true, precision));
            const Weights w(type, shape.rows, shape.cols, 3);
            const std::vector<float> x = uniform_floats(static_cast<size_t>(shape.n) * shape.cols, 4);
            const std::vector<float> bias = uniform_floats(shape.rows, 5);
            std::vector<float> one(static_cast<size_t>(shape.n) * shape.rows), two(one.size()), three(one.size());
            with_threads(1, [&] { matmul(x.data(), shape.n, w.view, bias.data(), one.data(), precision); });
            with_threads(2, [&] { matmul(x.data(), shape.n, w.view, bias.data(), two.data(), precision); });
            with_threads(3, [&] { matmul(x.data(), shape.n, w.view, bias.data(), three.data(), precision); });
            EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0);
            EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * 4), 0);
        }
    }
}

TEST(Matmul, RowAloneEqualsRowInBatch) {
    // Prefill computes a row inside a batch, decode computes it alone: the results must be the same bits.
    for (auto [type, precision] : kVariants) {
        const int n = 512, cols = 576, rows = 200;
        SCOPED_TRACE(case_name(type, n, cols, rows, true, precision));
        const Weights w(type, rows, cols, 6);
        const std::vector<float> x = uniform_floats(static_cast<size_t>(n) * cols, 7);
        const std::vector<float> bias = uniform_floats(rows, 8);
        std::vector<float> batch(static_cast<size_t>(n) * rows);
        matmul(x.data(), n, w.view, bias.data(), batch.data(), precision);
        std::vector<float> part(static_cast<size_t>(17) * rows);
        for (int i : {0, 1, 2, 3, 4, 5, 255, 510, 511}) {
            matmul(x.data() + static_cast<size_t>(i) * cols, 1, w.view, bias.data(), part.data(), precision);
            ASSERT_EQ(std::memcmp(part.data(), &batch[static_cast<size_t>(i) * rows], rows * 4), 0) << "row " << i;
        }
        // Sub-batches at every alignment to the micro-tile rows, and decode batches (4 to 8 rows: one batch tile on
        // the AVX2 path, 5 to 8 on the AVX-512 path; 3 rows: one AVX2 micro-tile).
        for (int size : {3, 4, 5, 7, 8, 17}) {
            for (int first : {0, 1, 3, 494}) {
                const int count = std::min(size, n - first);
                matmul(x.data() + static_cast<size_t>(first) * cols, count, w.view, bias.data(), part.data(),
                       precision);
                ASSERT_EQ(std::memcmp(part.data(), &batch[static_cast<size_t>(first) * rows], count * rows * 4), 0)
                    << "rows " << first << ".." << first + count - 1;
            }
        }
    }
}

/// Same class of value: both NaN, or both the same infinity, or both finite.
bool same_class(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return true;
}

TEST(Matmul, InfinityAndNanPropagate) {
    const uint16_t bf16_inf = 0x7f80, bf16_nan = 0x7fc0, f16_inf = 0x7c00, f16_nan = 0x7e00;
    // 64 x 200: enough rows and panels that the BF16 and F16 panels are widened to fp32 once for their tiles.
    for (const Variant& variant : kVariants) {
        // Variables, not a structured binding: clang 14 cannot capture a binding in the lambdas below.
        const MatrixType type = variant.type;
        const MatmulPrecision precision = variant.precision;
        for (auto [n, rows] : {std::pair{6, 9}, std::pair{64, 200}}) {
            const int cols = 72;
            SCOPED_TRACE(case_name(type, n, cols, rows, false, precision));
            Weights w(type, rows, cols, 9);
            std::vector<float> x = uniform_floats(static_cast<size_t>(n) * cols, 10);
            // Row 1 of W: +inf at column 5; row 2: -inf at column 40; row 3: NaN at column 71 (the vector tail);
            // row 4: +inf and -inf (inf - inf = NaN).
            const auto set_inf = [&](int row, int col, bool negative) {
                if (type == MatrixType::F32) {
                    w.set(row, col, negative ? -INFINITY : INFINITY);
                } else {
                    const uint16_t inf = type == MatrixType::BF16 ? bf16_inf : f16_inf;
                    w.set(row, col, static_cast<uint16_t>(inf | (negative ? 0x8000 : 0)));
                }
            };
            set_inf(1, 5, false);
            set_inf(2, 40, true);
            set_inf(4, 6, false);
            set_inf(4, 7, true);
            if (type == MatrixType::F32) {
                w.set(3, 71, std::numeric_limits<float>::quiet_NaN());
            } else {
                w.set(3, 71, type == MatrixType::BF16 ? bf16_nan : f16_nan);
            }
            // Input row 2 has x = 0 where W row 1 is inf (0 * inf = NaN); input row 3 has a NaN; row 4 an infinity.
            x[2 * cols + 5] = 0.0f;
            x[3 * cols + 10] = std::numeric_limits<float>::quiet_NaN();
            x[4 * cols + 20] = INFINITY;
            GuardedOutput y(n, rows, rows);
            matmul(x.data(), n, w.view, nullptr, y.data(), precision);
            const std::vector<double> ref = reference::matmul(x.data(), n, w.view, nullptr, precision);
            int non_finite = 0;
            for (int i = 0; i < n; ++i) {
                for (int j = 0; j < rows; ++j) {
                    const double r = ref[static_cast<size_t>(i) * rows + j];
                    non_finite += !std::isfinite(r);
                    EXPECT_TRUE(same_class(y.at(i, j), r))
                        << "y[" << i << "][" << j << "] = " << y.at(i, j) << ", ref " << r;
                }
            }
            EXPECT_GE(non_finite, 4 * n + rows);  // the sanity of the test itself: most cases are not finite
            EXPECT_TRUE(y.guards_intact(0, rows));
        }
    }
}

TEST(Matmul, Bf16ActivationsRoundToNearestEven) {
    // W = [[1.0]] (BF16, one input feature): each output is exactly the activation as rounded by the kernel.
    const uint16_t one_bf16 = 0x3f80;
    const MatrixView w{MatrixType::BF16, &one_bf16, 1, 1};
    const float ulp = 0x1p-7f;  // BF16 spacing in [1, 2)
    const std::vector<float> x = {
        1 + ulp / 2,                // tie: down to the even 1.0
        1 + ulp + ulp / 2,          // tie: up to the even 1 + 2 ulp
        1 + ulp / 2 + 0x1p-20f,     // just above the tie: up
        -(1 + ulp / 2 - 0x1p-20f),  // just below the tie: down
        0x1p-120f * (1 + 0x1p-8f),  // small normal, tie to even
        3.0e38f,                    // rounds to a finite BF16
        3.4e38f,                    // beyond the largest BF16: infinity
        -3.4e38f,                   // and -infinity
        INFINITY,
        -0.0f,
        1.0f / 3.0f,
        -2.7182817f,
        123456.78f,
        0.1f,
        5.877471754e-39f * 3,  // subnormal float (paths that flush denormals give 0: allowed below)
    };
    std::vector<float> y(x.size());
    matmul(x.data(), static_cast<int>(x.size()), w, nullptr, y.data(), MatmulPrecision::Bf16);
    for (size_t i = 0; i < x.size(); ++i) {
        const double expected = reference::round_to_bf16(x[i]);
        if (std::fpclassify(x[i]) == FP_SUBNORMAL && y[i] == 0.0f) continue;  // flushed by the hardware (header)
        EXPECT_EQ(static_cast<double>(y[i]), expected) << "x = " << x[i];
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    matmul(&nan, 1, w, nullptr, y.data(), MatmulPrecision::Bf16);
    EXPECT_TRUE(std::isnan(y[0]));
    // Exact keeps the activation as it is.
    matmul(x.data(), static_cast<int>(x.size()), w, nullptr, y.data(), MatmulPrecision::Exact);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << "x = " << x[i];
}

TEST(Matmul, EmptyShapes) {
    const Weights w(MatrixType::BF16, 7, 8, 1);
    std::vector<float> x(8, 1.0f), y(7, kGuard);
    matmul(x.data(), 0, w.view, nullptr, y.data());
    EXPECT_EQ(y, std::vector<float>(7, kGuard));
    const MatrixView no_rows{MatrixType::BF16, w.view.data, 0, 8};
    matmul(x.data(), 1, no_rows, nullptr, y.data());
    EXPECT_EQ(y, std::vector<float>(7, kGuard));
}

}  // namespace
}  // namespace kascade
