// tests/tokenizer/bpe_merge_test.cpp: the heap-based merge loop against the naive "merge the best pair" loop.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/tokenizer/bpe_merge.h"

namespace kascade {
namespace {

/// The definition: repeatedly merge the adjacent pair with the lowest priority (the leftmost one on ties).
std::vector<int32_t> naive_merge(std::vector<int32_t> ids, const BpePairTable& table) {
    while (true) {
        const BpeMergeRule* best = nullptr;
        std::size_t best_at = 0;
        for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
            const BpeMergeRule* rule = table.find(ids[i], ids[i + 1]);
            if (rule && (!best || rule->priority < best->priority)) {
                best = rule;
                best_at = i;
            }
        }
        if (!best) return ids;
        ids[best_at] = best->merged_id;
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
}

// Random vocabularies over a 3-letter alphabet with few distinct priorities, so that ties, overlapping pairs
// ("aaa") and chains of merges are common; long sequences so that the heap sees thousands of stale entries.
TEST(BpeMerge, MatchesNaiveLoopOnRandomRules) {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 200; ++trial) {
        BpePairTable table;
        const int n_base = 3;
        int next_id = n_base;
        std::vector<int32_t> known = {0, 1, 2};
        const int n_rules = 1 + static_cast<int>(rng() % 40);
        for (int r = 0; r < n_rules; ++r) {
            const int32_t left = known[rng() % known.size()];
            const int32_t right = known[rng() % known.size()];
            if (table.find(left, right)) continue;
            table.add(left, right, {next_id, static_cast<double>(rng() % 5)});
            known.push_back(next_id++);
        }
        const std::size_t length = trial < 100 ? rng() % 20 : 500 + rng() % 1500;
        std::vector<int32_t> ids(length);
        for (auto& id : ids) id = static_cast<int32_t>(rng() % n_base);
        std::vector<int32_t> fast = ids;
        bpe_merge(fast, table);
        ASSERT_EQ(fast, naive_merge(ids, table)) << "trial " << trial << ", length " << length;
    }
}

TEST(BpeMerge, KeepsFirstRuleForAPair) {
    BpePairTable table;
    table.add(0, 1, {5, 1.0});
    table.add(0, 1, {6, 0.0});
    ASSERT_NE(table.find(0, 1), nullptr);
    EXPECT_EQ(table.find(0, 1)->merged_id, 5);
    EXPECT_EQ(table.find(1, 0), nullptr);
    std::vector<int32_t> ids = {0, 1, 0, 1};
    bpe_merge(ids, table);
    EXPECT_EQ(ids, (std::vector<int32_t>{5, 5}));
}

}  // namespace
}  // namespace kascade
