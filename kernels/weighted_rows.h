// kernels/weighted_rows.h: the fp32 value kernel of decode attention, the weighted sum of value rows (internal to
// the decode kernels; not a public API). The dense and sparse decode passes (dense_attention.cpp) and the decode
// anchor's fused dense + mass pass (decode_scoring.cpp) take their values with it; under BF16 products over a BF16
// cache they take weighted_rows_bf16_group (decode_bf16_dot.h) instead.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_simd.h"

namespace kascade::detail {

/// o[j0 .. j0 + NW*L) = the sum over kk < n of p[kk] * row_of(kk)[j0 ..] (added to o's contents when `add`), in NW
/// registers of L lanes; row_of returns a float or a BF16 (uint16_t) row. Two keys per step into two sets of
/// accumulators: with one set each key's multiply-adds wait on the previous key's.
template <int L, int NW, typename RowOf>
void weighted_rows_in(const RowOf& row_of, const float* p, int n, int j0, bool add, float* o) {
    using O = Vec<L>;
    using V = typename O::type;
    V even[NW], odd[NW];
    KASCADE_UNROLL
    for (int c = 0; c < NW; ++c) even[c] = odd[c] = O::zero();
    int kk = 0;
    constexpr int kChunkBytes = NW * L * sizeof(*row_of(0));
    for (; kk + 2 <= n; kk += 2) {
        const auto* r0 = row_of(kk) + j0;
        const auto* r1 = row_of(kk + 1) + j0;
        prefetch_bytes(row_of(std::min(kk + kPrefetchRows, n - 1)) + j0, kChunkBytes);
        prefetch_bytes(row_of(std::min(kk + 1 + kPrefetchRows, n - 1)) + j0, kChunkBytes);
        const V w0 = O::set1(p[kk]), w1 = O::set1(p[kk + 1]);
        KASCADE_UNROLL
        for (int c = 0; c < NW; ++c) {
            even[c] = O::fma(w0, O::load(r0 + c * L), even[c]);
            odd[c] = O::fma(w1, O::load(r1 + c * L), odd[c]);
        }
    }
    if (kk < n) {
        const auto* r0 = row_of(kk) + j0;
        const V w0 = O::set1(p[kk]);
        KASCADE_UNROLL
        for (int c = 0; c < NW; ++c) even[c] = O::fma(w0, O::load(r0 + c * L), even[c]);
    }
    KASCADE_UNROLL
    for (int c = 0; c < NW; ++c) {
        const V sum = O::add(even[c], odd[c]);
        O::store(o + j0 + c * L, add ? O::add(O::load(o + j0 + c * L), sum) : sum);
    }
}

/// Calls values(std::integral_constant<int, L>{}, std::integral_constant<int, NW>{}, j0) over the columns of a
/// head_dim-d row in chunks of NW registers of L lanes: four of the widest registers at a time (the value kernel's
/// two sets of accumulators then take 8 of them), the rest in 8-lane ones.
template <typename ValueChunk>
void for_each_value_chunk(int d, ValueChunk values) {
    using Wide = std::integral_constant<int, kWideLanes>;
    using Narrow = std::integral_constant<int, kLanes>;
    int j0 = 0;
    for (; j0 + 4 * kWideLanes <= d; j0 += 4 * kWideLanes) values(Wide{}, std::integral_constant<int, 4>{}, j0);
    for (; j0 + 4 * kLanes <= d; j0 += 4 * kLanes) values(Narrow{}, std::integral_constant<int, 4>{}, j0);
    switch ((d - j0) / kLanes) {
        case 3:
            values(Narrow{}, std::integral_constant<int, 3>{}, j0);
            break;
        case 2:
            values(Narrow{}, std::integral_constant<int, 2>{}, j0);
            break;
        case 1:
            values(Narrow{}, std::integral_constant<int, 1>{}, j0);
            break;
        default:
            break;
    }
}

/// o[0 .. d) = the sum over kk < n of p[kk] * row_of(kk) (added to o's contents when `add`).
template <typename RowOf>
void weighted_rows(const RowOf& row_of, const float* p, int n, int d, bool add, float* o) {
    for_each_value_chunk(d, [&](auto lanes, auto nw, int j0) {
        weighted_rows_in<decltype(lanes)::value, decltype(nw)::value>(row_of, p, n, j0, add, o);
    });
}

/// weighted_rows_in for GC query heads at once: o[g * d + j0 ..] over the weights p[g * ld + kk], g < GC. Each chunk
/// of a row is loaded and widened once for the GC heads; GC x NW independent accumulators, one multiply-add per key.
template <int L, int NW, int GC, typename RowOf>
void weighted_rows_heads_in(const RowOf& row_of, const float* p, int ld, int n, int d, int j0, bool add, float* o) {
    using O = Vec<L>;
    using V = typename O::type;
    V acc[GC][NW];
    KASCADE_UNROLL
    for (int g = 0; g < GC; ++g) {
        KASCADE_UNROLL
        for (int c = 0; c < NW; ++c) acc[g][c] = O::zero();
    }
    constexpr int kChunkBytes = NW * L * sizeof(*row_of(0));
    for (int kk = 0; kk < n; ++kk) {
        const auto* r = row_of(kk) + j0;
        prefetch_bytes(row_of(std::min(kk + kPrefetchRows, n - 1)) + j0, kChunkBytes);
        V row[NW];
        KASCADE_UNROLL
        for (int c = 0; c < NW; ++c) row[c] = O::load(r + c * L);
        KASCADE_UNROLL
        for (int g = 0; g < GC; ++g) {
            const V w = O::set1(p[static_cast<int64_t>(g) * ld + kk]);
            KASCADE_UNROLL
            for (int c = 0; c < NW; ++c) acc[g][c] = O::fma(w, row[c], acc[g][c]);
        }
    }
    KASCADE_UNROLL
    for (int g = 0; g < GC; ++g) {
        float* og = o + static_cast<int64_t>(g) * d + j0;
        KASCADE_UNROLL
        for (int c = 0; c < NW; ++c) O::store(og + c * L, add ? O::add(O::load(og + c * L), acc[g][c]) : acc[g][c]);
    }
}

/// o[g * d .. g * d + d) = the sum over kk < n of p[g * ld + kk] * row_of(kk) (added to o's contents when `add`) for
/// every query head g < group of a KV head. BF16 rows are widened once for up to four heads (two in 8-lane registers):
/// widening each row for each head on its own took two instructions per 16 values and head on the ports the
/// multiply-adds use. On a 2-vCPU Xeon, one thread's dense decode attention over 8K keys of the 1B shape (BF16 cache
/// in L3, exact products, after score_4x4) went from 1.89-2.07 to 1.54-1.60 ms (bench/README.md). fp32 rows take one
/// head at a time (weighted_rows): a variant over the whole group measured 29 % slower there (16-core Xeon, 32K keys).
template <typename RowOf>
void weighted_rows_group(const RowOf& row_of, const float* p, int ld, int group, int n, int d, bool add, float* o) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*row_of(0))>, uint16_t>) {
        constexpr int kMaxHeads = kWideLanes == 16 ? 4 : 2;
        for_each_value_chunk(d, [&](auto lanes, auto nw, int j0) {
            constexpr int L = decltype(lanes)::value, NW = decltype(nw)::value;
            for (int g0 = 0; g0 < group; g0 += kMaxHeads) {
                const float* pg = p + static_cast<int64_t>(g0) * ld;
                float* og = o + static_cast<int64_t>(g0) * d;
                // Heads are at most kMaxHeads: with 8-lane registers the 3- and 4-head cases are never taken, and
                // the std::min keeps them from instantiating kernels whose accumulators would not fit the registers.
                switch (std::min(kMaxHeads, group - g0)) {
                    case 4:
                        weighted_rows_heads_in<L, NW, std::min(4, kMaxHeads)>(row_of, pg, ld, n, d, j0, add, og);
                        break;
                    case 3:
                        weighted_rows_heads_in<L, NW, std::min(3, kMaxHeads)>(row_of, pg, ld, n, d, j0, add, og);
                        break;
                    case 2:
                        weighted_rows_heads_in<L, NW, 2>(row_of, pg, ld, n, d, j0, add, og);
                        break;
                    default:
                        weighted_rows_heads_in<L, NW, 1>(row_of, pg, ld, n, d, j0, add, og);
                        break;
                }
            }
        });
    } else {
        for (int g = 0; g < group; ++g)
            weighted_rows(row_of, p + static_cast<int64_t>(g) * ld, n, d, add, o + static_cast<int64_t>(g) * d);
    }
}

}  // namespace kascade::detail
