// tests/kernels/test_layer_ops.cpp: the small per-element kernels of a layer (exp_simd, rmsnorm, add_rmsnorm,
// swiglu, log_sum_exp) against their double-precision twins (kernels/reference/layer_ops_reference.h), over odd
// sizes, sizes above the parallel threshold, special values and 1 vs 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/exp_simd.h"
#include "kernels/log_sum_exp.h"
#include "kernels/reference/layer_ops_reference.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"

namespace kascade {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> normal_floats(size_t count, uint64_t seed, float scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(count);
    for (float& e : v) e = normal(rng);
    return v;
}

/// |value - exact| in units of the last place of the float nearest to `exact` (a normal float).
double ulp_error(float value, double exact) {
    int exponent = 0;
    std::frexp(exact, &exponent);  // exact = m * 2^exponent, m in [0.5, 1)
    return std::abs(value - exact) / std::ldexp(1.0, exponent - 24);
}

TEST(ExpSimd, WithinTwoUlpOverTheNormalRange) {
    // 2M evenly spaced points over [-87.33, 88.72] plus tiny magnitudes (where e^x ~ 1 + x), run through a
    // vectorised loop as the kernels do.
    constexpr int kPoints = 1 << 21;
    std::vector<float> x;
    for (int i = 0; i < kPoints; ++i) x.push_back(-87.33f + (88.72f + 87.33f) * static_cast<float>(i) / kPoints);
    for (const float tiny : normal_floats(1000, 12, 1e-4f)) x.push_back(tiny);
    x.push_back(1e-30f);
    x.push_back(-1e-30f);
    x.push_back(88.7228317f);  // the largest float whose e^x is finite
    std::vector<float> e(x.size());
#pragma omp simd
    for (size_t i = 0; i < x.size(); ++i) e[i] = exp_simd(x[i]);
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double err = ulp_error(e[i], std::exp(static_cast<double>(x[i])));
        if (err > worst) worst = err, worst_x = x[i];
    }
    EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
}

TEST(ExpSimd, SpecialValues) {
    EXPECT_EQ(exp_simd(0.0f), 1.0f);
    EXPECT_EQ(exp_simd(-kInf), 0.0f);
    EXPECT_EQ(exp_simd(kInf), kInf);
    EXPECT_EQ(exp_simd(88.73f), kInf);  // e^88.73 > FLT_MAX
    EXPECT_EQ(exp_simd(1000.0f), kInf);
    EXPECT_EQ(exp_simd(-88.0f), 0.0f);  // would be subnormal: flushed
    EXPECT_EQ(exp_simd(-1000.0f), 0.0f);
    EXPECT_TRUE(std::isnan(exp_simd(kNaN)));
    EXPECT_TRUE(std::isfinite(exp_simd(88.7228317f)));
}

struct NormCase {
    int n_rows, dim;
};
constexpr NormCase kNormCases[] = {{1, 1}, {3, 7}, {1, 576}, {5, 1000}, {200, 576}, {129, 2048}};

std::string describe(const NormCase& c) {
    return "rmsnorm(rows=" + std::to_string(c.n_rows) + ",dim=" + std::to_string(c.dim) + ")";
}

/// max |y - ref| / max |ref|.
double max_relative_error_of(const std::vector<float>& y, const std::vector<double>& ref) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        err = std::max(err, std::abs(y[i] - ref[i]));
        scale = std::max(scale, std::abs(ref[i]));
    }
    return scale > 0 ? err / scale : err;
}

TEST(RmsNorm, MatchesReference) {
    for (const NormCase& c : kNormCases) {
        const size_t count = static_cast<size_t>(c.n_rows) * c.dim;
        const std::vector<float> x = normal_floats(count, 1, 3.0f);
        std::vector<float> weight = normal_floats(c.dim, 2, 0.2f);
        for (float& w : weight) w += 1.0f;
        std::vector<float> y(count);
        rmsnorm(x.data(), weight.data(), y.data(), c.n_rows, c.dim, 1e-5f);
        EXPECT_LE(max_relative_error_of(y, reference::rmsnorm(x.data(), weight.data(), c.n_rows, c.dim, 1e-5)), 1e-6)
            << describe(c);
        std::vector<float> in_place = x;
        rmsnorm(in_place.data(), weight.data(), in_place.data(), c.n_rows, c.dim, 1e-5f);
        EXPECT_EQ(in_place, y) << describe(c) << " in place";
    }
}

TEST(AddRmsNorm, MatchesReferenceAndTheSeparateSteps) {
    for (const NormCase& c : kNormCases) {
        const size_t count = static_cast<size_t>(c.n_rows) * c.dim;
        std::vector<float> x = normal_floats(count, 3, 2.0f);
        const std::vector<float> delta = normal_floats(count, 4, 1.0f);
        const std::vector<float> weight = normal_floats(c.dim, 5, 1.0f);
        std::vector<float> added(count);
        for (size_t i = 0; i < count; ++i) added[i] = x[i] + delta[i];
        std::vector<float> y(count);
        add_rmsnorm(x.data(), delta.data(), weight.data(), y.data(), c.n_rows, c.dim, 1e-6f);
        EXPECT_EQ(x, added) << describe(c);
        EXPECT_LE(max_relative_error_of(y, reference::rmsnorm(added.data(), weight.data(), c.n_rows, c.dim, 1e-6)),
                  1e-6)
            << describe(c);
        std::vector<float> separate(count);
        rmsnorm(added.data(), weight.data(), separate.data(), c.n_rows, c.dim, 1e-6f);
        EXPECT_EQ(y, separate) << describe(c);
    }
}

TEST(SwiGlu, MatchesReferenceIncludingSaturation) {
    for (const int64_t n : {int64_t{1}, int64_t{17}, int64_t{1000}, int64_t{200000}}) {
        std::vector<float> gate = normal_floats(n, 6, 4.0f);
        const std::vector<float> up = normal_floats(n, 7, 1.0f);
        if (n >= 17) {  // far into both tails of silu, and past exp's range
            gate[0] = 100.0f, gate[1] = -100.0f, gate[2] = 90.0f, gate[3] = -90.0f, gate[4] = 0.0f;
        }
        std::vector<float> out(n);
        swiglu(gate.data(), up.data(), out.data(), n);
        const std::vector<double> ref = reference::swiglu(gate.data(), up.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_NEAR(out[i], ref[i], 1e-6 * std::abs(ref[i]) + 1e-30)
                << "swiglu(n=" << n << ") at " << i << ", gate " << gate[i];
        }
        std::vector<float> in_place = gate;
        swiglu(in_place.data(), up.data(), in_place.data(), n);
        EXPECT_EQ(in_place, out) << "swiglu(n=" << n << ") in place";
    }
}

TEST(LayerOps, SameResultForOneAndTwoThreads) {
    const int rows = 300, dim = 576;
    const std::vector<float> x = normal_floats(rows * dim, 8, 1.0f), d = normal_floats(rows * dim, 9, 1.0f);
    const std::vector<float> w = normal_floats(dim, 10, 1.0f);
    auto run = [&](int threads) {
        omp_set_num_threads(threads);
        std::vector<float> xs = x, y(x.size()), s(x.size());
        add_rmsnorm(xs.data(), d.data(), w.data(), y.data(), rows, dim, 1e-5f);
        swiglu(xs.data(), y.data(), s.data(), static_cast<int64_t>(s.size()));
        return s;
    };
    const int saved = omp_get_max_threads();
    const std::vector<float> one = run(1), two = run(2);
    omp_set_num_threads(saved);
    EXPECT_EQ(one, two);
}

TEST(LogSumExp, MatchesReference) {
    for (const int64_t n : {int64_t{1}, int64_t{5}, int64_t{1023}, int64_t{1025}, int64_t{49152}, int64_t{128256}}) {
        for (const float scale : {1.0f, 10.0f}) {
            std::vector<float> z = normal_floats(n, 11 + n, scale);
            z[n / 2] += 50.0f;  // values far from 0 on both sides of the maximum
            const double ref = reference::log_sum_exp(z.data(), n);
            EXPECT_NEAR(log_sum_exp(z.data(), n), ref, 1e-6 * std::max(1.0, std::abs(ref)))
                << "log_sum_exp(n=" << n << ", scale=" << scale << ")";
        }
    }
}

TEST(LogSumExp, SpecialValues) {
    const std::vector<float> all_minus_inf(100, -kInf);
    EXPECT_EQ(log_sum_exp(all_minus_inf.data(), 100), -kInf);
    std::vector<float> some_minus_inf(100, -kInf);
    some_minus_inf[37] = 2.5f, some_minus_inf[38] = 2.5f;
    EXPECT_NEAR(log_sum_exp(some_minus_inf.data(), 100), 2.5 + std::log(2.0), 1e-6);
    std::vector<float> with_inf(100, 0.0f);
    with_inf[3] = kInf;
    EXPECT_EQ(log_sum_exp(with_inf.data(), 100), kInf);
    std::vector<float> with_nan(100, 0.0f);
    with_nan[99] = kNaN;
    EXPECT_TRUE(std::isnan(log_sum_exp(with_nan.data(), 100)));
    const float one = -3.25f;
    EXPECT_EQ(log_sum_exp(&one, 1), -3.25);
}

}  // namespace
}  // namespace kascade
