// tests/kernels/test_attention_simd.cpp: the vector helpers the softmax passes take in the widest registers
// (Vec<kWideLanes>, kernels/attention_simd.h) against double-precision exp2 and base/bf16.h's rounding, and the wide
// exp2 against the 8-lane one bit for bit (the width must not change a weight).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "kernels/attention_simd.h"

namespace kascade::detail {
namespace {

using Wide = Vec<kWideLanes>;

/// Arguments of every kind the softmax passes give exp2: the working range (scores minus their maximum, <= 0), the
/// underflow edge around -126, a few positive values, and -inf (masked keys).
std::vector<float> exp2_arguments() {
    std::vector<float> x = {0.0f,
                            -0.0f,
                            -1.0f,
                            -0.5f,
                            0.5f,
                            1.0f,
                            3.25f,
                            -125.9f,
                            -126.0f,
                            -126.1f,
                            -127.0f,
                            -300.0f,
                            -std::numeric_limits<float>::infinity()};
    std::mt19937 gen(11);
    std::uniform_real_distribution<float> working(-40.0f, 0.0f);
    while (x.size() % Wide::lanes != 0 || x.size() < 4096) x.push_back(working(gen));
    return x;
}

TEST(AttentionSimd, WideExp2MatchesTheEightLaneExp2BitForBitAndDoubleExp2) {
    const std::vector<float> x = exp2_arguments();
    std::vector<float> wide(x.size()), narrow(x.size());
    for (size_t i = 0; i < x.size(); i += Wide::lanes)
        Wide::store(wide.data() + i, Wide::exp2(Wide::load(x.data() + i)));
    for (size_t i = 0; i < x.size(); i += kLanes) v_store(narrow.data() + i, v_exp2(v_load(x.data() + i)));
    for (size_t i = 0; i < x.size(); ++i) {
        SCOPED_TRACE("x = " + std::to_string(x[i]));
        EXPECT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(narrow[i]));
        if (x[i] < -126.0f) {
            EXPECT_EQ(wide[i], 0.0f);  // below the normal range (and -inf) exactly 0
        } else {
            const double exact = std::exp2(static_cast<double>(x[i]));
            EXPECT_NEAR(wide[i], exact, 4e-7 * exact);
        }
    }
}

TEST(AttentionSimd, WideRoundingAndReductionsMatchScalarOnes) {
    std::mt19937 gen(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> x(Wide::lanes), rounded(Wide::lanes);
    for (int trial = 0; trial < 200; ++trial) {
        for (float& v : x) v = normal(gen);
        const auto a = Wide::load(x.data());
        Wide::store(rounded.data(), Wide::round_bf16(a));
        double sum = 0;
        float mx = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < Wide::lanes; ++j) {
            EXPECT_EQ(rounded[j], float_from_bf16(bf16_from_float(x[j])));
            sum += x[j];
            mx = std::max(mx, x[j]);
        }
        EXPECT_EQ(Wide::hmax(a), mx);
        EXPECT_NEAR(Wide::hsum(a), sum, 1e-5 * (1 + std::abs(sum)));
    }
}

}  // namespace
}  // namespace kascade::detail
