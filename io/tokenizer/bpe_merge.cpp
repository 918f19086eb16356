// io/tokenizer/bpe_merge.cpp: O(n log n) BPE merging with a linked list and a lazily invalidated heap.
#include "io/tokenizer/bpe_merge.h"

#include <algorithm>
#include <queue>

namespace kascade {

void BpePairTable::add(int32_t left, int32_t right, BpeMergeRule rule) {
    rules_.try_emplace(key(left, right), rule);
}

const BpeMergeRule* BpePairTable::find(int32_t left, int32_t right) const {
    auto it = rules_.find(key(left, right));
    return it == rules_.end() ? nullptr : &it->second;
}

namespace {

/// A pair that was adjacent when pushed. It is still current if both symbols are alive, still neighbours and
/// still hold the ids recorded here (a symbol's id only changes by absorbing its right neighbour, and a merged
/// token never equals one of its parts, so an id comparison detects every change).
struct Candidate {
    double priority;
    int32_t left;  ///< symbol index; symbols keep the index of their first initial token, so this orders by position
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t merged_id;
};

struct WorseCandidate {
    bool operator()(const Candidate& a, const Candidate& b) const {
        if (a.priority != b.priority) return a.priority > b.priority;
        return a.left > b.left;
    }
};

}  // namespace

void bpe_merge(std::vector<int32_t>& ids, const BpePairTable& table) {
    const auto n = static_cast<int32_t>(ids.size());
    if (n < 2) return;
    std::vector<int32_t> next(n), prev(n);
    for (int32_t i = 0; i < n; ++i) {
        prev[i] = i - 1;
        next[i] = i + 1 < n ? i + 1 : -1;
    }
    std::vector<char> alive(n, 1);
    std::vector<Candidate> storage;
    storage.reserve(n);
    std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> heap(WorseCandidate{}, std::move(storage));
    auto push_pair = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        if (const BpeMergeRule* rule = table.find(ids[left], ids[right])) {
            heap.push({rule->priority, left, right, ids[left], ids[right], rule->merged_id});
        }
    };
    for (int32_t i = 0; i + 1 < n; ++i) push_pair(i, i + 1);

    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || ids[c.left] != c.left_id ||
            ids[c.right] != c.right_id) {
            continue;
        }
        ids[c.left] = c.merged_id;
        alive[c.right] = 0;
        next[c.left] = next[c.right];
        if (next[c.right] >= 0) prev[next[c.right]] = c.left;
        push_pair(prev[c.left], c.left);
        push_pair(c.left, next[c.left]);
    }
    int32_t out = 0;
    for (int32_t i = 0; i < n; ++i) {
        if (alive[i]) ids[out++] = ids[i];
    }
    ids.resize(out);
}

}  // namespace kascade
