// pipeline/runtime/shared_key_set.h: one set of keys that every head of a decode step attends, as the OmniKV and
// LessIsMore baselines select it (where Kascade keeps a set per KV head): the ranking both use, and the set held as a
// one-head decode selection that every KV head reads through a head map of zeros.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention_types.h"
#include "pipeline/runtime/attention_density.h"

namespace kascade {

/// The `count` best keys of [begin, end) by score (higher first, ties to the lower key index, NaN last), in rank
/// order. count is capped by end - begin.
std::vector<int32_t> top_keys_by_score(const float* score, int begin, int end, int count);

/// Keys a decode step attends in every head, besides the query's own tile (which is always attended).
class SharedKeySet {
  public:
    /// Holds `keys` (strictly before the query's tile of a `tile`-token tiling; any order, no repeats).
    void assign(std::vector<int32_t> keys, int tile);

    /// Exact attention of a decode call (shape.n_q == 1) over the set plus the query's own tile, in every head; a
    /// layer with a sliding window attends only the keys inside it.
    void attend(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out);

    /// Keys that attend() attends, per query head, summed over heads (token_sparse_decode_density).
    LayerDensity density(const AttnShape& shape);

    /// The set as a decode selection of one KV head (n_q_tiles == 1), ascending.
    const TokenSelection& selection() const { return selection_; }

  private:
    const int32_t* head_map(int n_kv_heads);

    TokenSelection selection_;
    std::vector<int32_t> zeros_;
};

}  // namespace kascade
