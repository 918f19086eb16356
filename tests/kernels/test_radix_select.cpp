// tests/kernels/test_radix_select.cpp: select_largest (kernels/radix_select.h) against a full stable sort, on value
// mixes that stress each part of the radix select: heavy ties at the threshold, every key in one radix bucket, NaN,
// signed zeros and infinities, lengths around the 16-key vector width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/radix_select.h"
#include "kernels/reference/attention_reference.h"

namespace kascade {
namespace {

enum class Values { Normal, FewLevels, OneBucket, Specials, AllEqual };

std::vector<float> make_values(Values kind, int n, uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -0.0f, 0.0f, inf, -inf, 1.0f, -1.0f, 1e-40f};
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) {
        switch (kind) {
            case Values::Normal:
                x[i] = normal(gen);
                break;
            case Values::FewLevels:  // four values: most of a budget's last level ties
                x[i] = static_cast<float>(std::uniform_int_distribution<int>(0, 3)(gen));
                break;
            case Values::OneBucket:  // one top-12-bit radix bucket: the nth_element sees every key
                x[i] = 1.0f + std::uniform_int_distribution<int>(0, 1000)(gen) * 1e-6f;
                break;
            case Values::Specials:
                x[i] = std::uniform_int_distribution<int>(0, 3)(gen) == 0
                           ? specials[std::uniform_int_distribution<int>(0, 7)(gen)]
                           : normal(gen);
                break;
            case Values::AllEqual:
                x[i] = 0.5f;
                break;
        }
    }
    return x;
}

/// The reference: NaN as -inf, then a stable sort by value, larger first (so ties keep the lower index).
std::vector<int32_t> expected_largest(const std::vector<float>& x, int budget, int base) {
    std::vector<float> row = x;
    for (float& v : row)
        if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
    std::vector<int> candidates(row.size());
    std::iota(candidates.begin(), candidates.end(), 0);
    const int k = std::clamp(budget, 0, static_cast<int>(row.size()));
    std::vector<int32_t> ids = reference::top_by_sort(row.data(), candidates, k);
    for (int32_t& id : ids) id += base;
    return ids;
}

TEST(RadixSelect, MatchesAStableSortWithTiesToTheLowerIndex) {
    const char* names[] = {"normal", "few levels", "one bucket", "specials", "all equal"};
    int case_seed = 0;
    for (Values kind : {Values::Normal, Values::FewLevels, Values::OneBucket, Values::Specials, Values::AllEqual}) {
        for (int n : {1, 15, 16, 17, 33, 100, 1000, 40000}) {
            const std::vector<float> x = make_values(kind, n, ++case_seed);
            for (int budget : {0, 1, n / 10, n / 2, n - 1, n, n + 5}) {
                SCOPED_TRACE(std::string(names[static_cast<int>(kind)]) + " n=" + std::to_string(n) +
                             " budget=" + std::to_string(budget));
                constexpr int kBase = 7;
                std::vector<uint32_t> scratch(2 * static_cast<size_t>(n));
                std::vector<int32_t> ids(static_cast<size_t>(n) + 1, -1);
                const int count = select_largest(x.data(), n, budget, kBase, scratch.data(), ids.data());
                EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + count), expected_largest(x, budget, kBase));
                // Nothing is written past the count: the caller's list may hold another head's keys there.
                EXPECT_EQ(ids[count], -1);
            }
        }
    }
}

}  // namespace
}  // namespace kascade
