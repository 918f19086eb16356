// io/tokenizer/bpe_merge.h: the merge loop shared by every BPE tokenizer (llama2.c scores, Hugging Face ranks).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kascade {

/// What merging an adjacent pair of tokens gives, and how early it is applied: among all adjacent pairs that have
/// a rule, the one with the lowest `priority` is merged first (ties: the leftmost pair).
struct BpeMergeRule {
    int32_t merged_id = -1;
    double priority = 0.0;  ///< llama2.c: -score of the merged token; Hugging Face: the merge's rank
};

/// All merge rules of a vocabulary, keyed by the (left id, right id) pair.
class BpePairTable {
  public:
    /// Adds a rule; a pair that already has one keeps the earlier rule.
    void add(int32_t left, int32_t right, BpeMergeRule rule);
    const BpeMergeRule* find(int32_t left, int32_t right) const;
    std::size_t size() const { return rules_.size(); }

  private:
    static uint64_t key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    std::unordered_map<uint64_t, BpeMergeRule> rules_;
};

/// Merges `ids` in place until no adjacent pair has a rule, always taking the best pair (lowest priority, then
/// leftmost), exactly as the naive "scan all pairs, merge the best, repeat" loop does, but in O(n log n): a doubly
/// linked list of symbols and a heap of candidate pairs whose stale entries are skipped when popped.
void bpe_merge(std::vector<int32_t>& ids, const BpePairTable& table);

}  // namespace kascade
