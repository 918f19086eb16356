// pipeline/runtime/shared_key_set.cpp: ranking keys and attending one key set in every head.
#include "pipeline/runtime/shared_key_set.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"
#include "kernels/sparse_attention.h"

namespace kascade {

std::vector<int32_t> top_keys_by_score(const float* score, int begin, int end, int count) {
    std::vector<int32_t> keys(std::max(0, end - begin));
    std::iota(keys.begin(), keys.end(), begin);
    count = std::clamp(count, 0, static_cast<int>(keys.size()));
    const auto better = [score](int32_t a, int32_t b) {
        const float sa = score[a], sb = score[b];
        const bool nan_a = std::isnan(sa), nan_b = std::isnan(sb);
        if (nan_a != nan_b) return nan_b;  // a number ranks above NaN
        if (!nan_a && sa != sb) return sa > sb;
        return a < b;
    };
    std::partial_sort(keys.begin(), keys.begin() + count, keys.end(), better);
    keys.resize(count);
    return keys;
}

void SharedKeySet::assign(std::vector<int32_t> keys, int tile) {
    std::sort(keys.begin(), keys.end());
    KASCADE_ASSERT(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
    selection_.n_kv_heads = 1;
    selection_.n_q_tiles = 1;
    selection_.tile = tile;
    selection_.max_k = std::max<int>(1, static_cast<int>(keys.size()));
    selection_.count.assign(1, static_cast<int32_t>(keys.size()));
    keys.resize(selection_.max_k);
    selection_.keys = std::move(keys);
}

const int32_t* SharedKeySet::head_map(int n_kv_heads) {
    zeros_.assign(n_kv_heads, 0);
    return zeros_.data();
}

void SharedKeySet::attend(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out) {
    KASCADE_ASSERT(shape.n_q == 1 && selection_.n_q_tiles == 1);
    attn_token_sparse_decode(shape, selection_.tile, q, k, v, selection_.keys.data(), selection_.count.data(),
                             selection_.max_k, head_map(shape.n_kv_heads), out);
}

LayerDensity SharedKeySet::density(const AttnShape& shape) {
    return token_sparse_decode_density(shape, selection_.tile, selection_, head_map(shape.n_kv_heads));
}

}  // namespace kascade
