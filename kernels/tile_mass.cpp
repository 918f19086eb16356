// kernels/tile_mass.cpp: attention mass pooled per (KV head, query tile, key tile), in one pass with the dense
// output, in one pass without V, or in a second pass from the row log-sum-exp; and the pre-softmax max score.
#include "kernels/tile_mass.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "base/error.h"
#include "kernels/attention_engine.h"
#include "kernels/attention_simd.h"

namespace kascade {
namespace {

using detail::QueryBlock;
using detail::v_add;
using detail::v_hmax;
using detail::v_hsum;
using detail::v_load;
using detail::v_max;
using detail::v_set1;
using detail::v_zero;
using detail::vf;

constexpr int kPoolKeyBlock = 64;  ///< target keys (and query rows) per block; rounded to whole tiles

void init_mass(const AttnShape& shape, int tile, TileMass* mass) {
    KASCADE_ASSERT(mass != nullptr && tile > 0 && shape.n_q == shape.n_k);
    mass->n_kv_heads = shape.n_kv_heads;
    mass->n_q_tiles = tile_count(shape.n_q, tile);
    mass->n_k_tiles = tile_count(shape.n_k, tile);
    mass->tile = tile;
    mass->mass.assign(static_cast<size_t>(mass->n_kv_heads) * mass->n_q_tiles * mass->n_k_tiles, 0.0f);
    mass->window = shape.effective_window();
    mass->n_keys = shape.n_k;
}

void init_token_mass(const AttnShape& shape, int tile, TokenMass* mass) {
    KASCADE_ASSERT(mass != nullptr && tile > 0 && shape.n_q == shape.n_k);
    mass->n_kv_heads = shape.n_kv_heads;
    mass->n_q_tiles = tile_count(shape.n_q, tile);
    mass->n_keys = shape.n_k;
    mass->tile = tile;
    mass->mass.assign(static_cast<size_t>(mass->n_kv_heads) * mass->n_q_tiles * mass->n_keys, 0.0f);
    mass->window = shape.effective_window();
}

// Sum (or max) of row[c] over the columns of local query tile lt: c = g * n_rows + i, i in [i0, i1), every g.
template <bool kMax>
float pool_columns(const float* row, int group, int n_rows, int i0, int i1) {
    vf acc = kMax ? v_set1(-std::numeric_limits<float>::infinity()) : v_zero();
    float tail = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
    for (int g = 0; g < group; ++g) {
        const float* r = row + g * n_rows;
        int i = i0;
        for (; i + detail::kLanes <= i1; i += detail::kLanes)
            acc = kMax ? v_max(acc, v_load(r + i)) : v_add(acc, v_load(r + i));
        for (; i < i1; ++i) tail = kMax ? std::max(tail, r[i]) : tail + r[i];
    }
    return kMax ? std::max(v_hmax(acc), tail) : v_hsum(acc) + tail;
}

/// One (KV head, query block) item of a pooling pass: its loaded query block and, for post-softmax pooling, the
/// rows' fixed maxima (lse in log2 units).
struct PoolItem {
    QueryBlock& block;
    const float* m_fixed;  ///< [n_pad], post-softmax only
    float* extra;          ///< the caller's per-thread scratch
    int kv_head, row0, n_rows;
    KvPtr k_head;
};

/// The second pass over Q.K both granularities share: one work item per (KV head, block of `block` query rows),
/// later blocks first; each loads its query block (and the rows' lse for post-softmax pooling, kMax false) and hands
/// it to pool_keys(item), which scores its keys and pools them into the item's own mass rows.
template <bool kMax, typename PoolKeys>
void pool_pass(const AttnShape& shape, int block, int key_block, size_t extra_floats, const float* q, KvPtr k,
               const float* lse, PoolKeys pool_keys) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(q != nullptr && k != nullptr && (kMax || lse != nullptr));
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_kv = shape.n_kv_heads;
    const int n_blocks = tile_count(shape.n_q, block);
    const int n_items = n_kv * n_blocks;
    const size_t cap = detail::round_up(group * block, detail::kPanel);
    const size_t block_floats = detail::query_block_floats(d, group, block, key_block);
    const size_t per_thread = block_floats + cap + extra_floats;
    std::vector<float> scratch(per_thread * omp_get_max_threads());
    const float prescale = kMax ? shape.scale : shape.scale * detail::kLog2e;

#pragma omp parallel
    {
        float* mine = scratch.data() + per_thread * omp_get_thread_num();
        QueryBlock b = detail::query_block_bind(mine, d, group, block, key_block);
        float* m_fixed = mine + block_floats;
#pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < n_items; ++item) {
            const int qb = n_blocks - 1 - item / n_kv;
            const int kv_head = item % n_kv;
            const int row0 = qb * block;
            const int n_rows = std::min(block, shape.n_q - row0);
            detail::query_block_load(b, shape, q, kv_head, row0, n_rows, prescale, false);
            if (!kMax) {
                std::fill(m_fixed, m_fixed + b.n_pad, 0.0f);
                for (int g = 0; g < group; ++g)
                    for (int i = 0; i < n_rows; ++i)
                        m_fixed[g * n_rows + i] =
                            lse[static_cast<int64_t>(kv_head * group + g) * shape.n_q + row0 + i] * detail::kLog2e;
            }
            pool_keys(PoolItem{b, m_fixed, m_fixed + cap, kv_head, row0, n_rows,
                               k + static_cast<int64_t>(kv_head) * shape.kv_stride * d});
        }
    }
}

// Token granularity: per candidate key of each query tile, the post-softmax probability (kMax false, needs lse) or
// the max scaled score (kMax true) pooled over the group's heads and the tile's rows.
template <bool kMax>
void token_pool_pass(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse, TokenMass* mass) {
    init_token_mass(shape, tile, mass);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int block = tile * std::max(1, kPoolKeyBlock / tile);
    pool_pass<kMax>(shape, block, kPoolKeyBlock, 0, q, k, lse, [&](const PoolItem& it) {
        QueryBlock& b = it.block;
        const int q_tile0 = it.row0 / tile;
        const int n_local_tiles = tile_count(it.n_rows, tile);
        // Candidates end at the last local tile's first row; they start in the window of the first row.
        const int key_end = it.row0 + (n_local_tiles - 1) * tile;
        for (int key0 = detail::window_key_begin(it.row0, b.window, 1); key0 < key_end; key0 += kPoolKeyBlock) {
            const int n_keys = std::min(kPoolKeyBlock, key_end - key0);
            detail::query_block_scores(b, it.k_head + static_cast<int64_t>(key0) * d, n_keys, key0);
            if (!kMax) detail::query_block_exp_fixed(b, n_keys, it.m_fixed);
            for (int lt = 0; lt < n_local_tiles; ++lt) {
                const int qt = q_tile0 + lt;
                const int lo = std::max(key0, first_window_key(qt, tile, b.window));
                const int hi = std::min(key0 + n_keys, qt * tile);
                const int i1 = std::min(it.n_rows, (lt + 1) * tile);
                float* out = mass->row(it.kv_head, qt);
                for (int j = lo; j < hi; ++j)
                    out[j] = pool_columns<kMax>(b.s + static_cast<int64_t>(j - key0) * b.n_pad, group, it.n_rows,
                                                lt * tile, i1);
            }
        }
    });
}

// Tile granularity: per key tile of each query tile, the post-softmax mass (kMax false, needs lse) or the max scaled
// score (kMax true), pooled over the group's heads, the tile's rows and the key tile's keys.
template <bool kMax>
void tile_pool_pass(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse, TileMass* mass) {
    init_mass(shape, tile, mass);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int block = tile * std::max(1, kPoolKeyBlock / tile);
    const size_t cap = detail::round_up(group * block, detail::kPanel);
    // Per thread: the pooled partial sums (or maxima) of each key tile of a key block, [block / tile][n_pad].
    pool_pass<kMax>(shape, block, block, cap * (block / tile), q, k, lse, [&](const PoolItem& it) {
        QueryBlock& b = it.block;
        float* partial = it.extra;
        const int n_vis = it.row0 + it.n_rows;
        const int q_tile0 = it.row0 / tile;
        const int n_local_tiles = tile_count(it.n_rows, tile);
        for (int key0 = detail::window_key_begin(it.row0, b.window, block); key0 < n_vis; key0 += block) {
            const int n_keys = std::min(block, n_vis - key0);
            detail::query_block_scores(b, it.k_head + static_cast<int64_t>(key0) * d, n_keys, key0);
            if (kMax) {
                detail::query_block_tile_max(b, n_keys, tile, partial);
            } else {
                detail::query_block_exp_fixed(b, n_keys, it.m_fixed);
                detail::query_block_tile_sums(b, n_keys, tile, partial);
            }
            for (int t = 0; t < tile_count(n_keys, tile); ++t) {
                const int kt = key0 / tile + t;
                const float* pk = partial + static_cast<int64_t>(t) * b.n_pad;
                for (int lt = 0; lt < n_local_tiles; ++lt) {
                    const int qt = q_tile0 + lt;
                    // Tiles wholly outside the window of every row of the query tile stay 0 (and a max over only
                    // masked scores would be -inf).
                    if (kt > qt || kt < first_window_tile(qt, tile, b.window)) continue;
                    const int i1 = std::min(it.n_rows, (lt + 1) * tile);
                    double acc = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
                    for (int g = 0; g < group; ++g)
                        for (int i = lt * tile; i < i1; ++i)
                            acc = kMax ? std::max<double>(acc, pk[g * it.n_rows + i]) : acc + pk[g * it.n_rows + i];
                    mass->row(it.kv_head, qt)[kt] = static_cast<float>(acc);
                }
            }
        }
    });
}

}  // namespace

void tile_mass_post_softmax(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse,
                            TileMass* mass) {
    tile_pool_pass<false>(shape, tile, q, k, lse, mass);
}

void attn_dense_prefill_with_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                  TileMass* mass) {
    KASCADE_ASSERT(v != nullptr && out != nullptr && mass != nullptr);
    detail::PrefillOutputs outputs;
    outputs.v = v;
    outputs.out = out;
    outputs.mass = mass;
    outputs.tile = tile;
    detail::dense_prefill_pass(shape, q, k, outputs);
}

void attn_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, TileMass* mass, float* lse) {
    KASCADE_ASSERT(mass != nullptr);
    detail::PrefillOutputs outputs;
    outputs.lse = lse;
    outputs.mass = mass;
    outputs.tile = tile;
    detail::dense_prefill_pass(shape, q, k, outputs);
}

void attn_row_lse(const AttnShape& shape, const float* q, KvPtr k, float* lse) {
    KASCADE_ASSERT(lse != nullptr);
    detail::PrefillOutputs outputs;
    outputs.lse = lse;
    detail::dense_prefill_pass(shape, q, k, outputs);
}

void tile_max_score(const AttnShape& shape, int tile, const float* q, KvPtr k, TileMass* scores) {
    tile_pool_pass<true>(shape, tile, q, k, nullptr, scores);
}

void attn_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, TokenMass* mass, float* lse) {
    KASCADE_ASSERT(mass != nullptr);
    std::vector<float> own_lse;
    if (lse == nullptr) {
        own_lse.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_q);
        lse = own_lse.data();
    }
    attn_row_lse(shape, q, k, lse);
    token_pool_pass<false>(shape, tile, q, k, lse, mass);
}

void token_mass_post_softmax(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse,
                             TokenMass* mass) {
    token_pool_pass<false>(shape, tile, q, k, lse, mass);
}

void token_max_score(const AttnShape& shape, int tile, const float* q, KvPtr k, TokenMass* scores) {
    token_pool_pass<true>(shape, tile, q, k, nullptr, scores);
}

}  // namespace kascade
