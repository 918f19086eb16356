// kernels/decode_bf16_dot.h: decode attention's products as BF16 dot products (vdpbf16ps) over a BF16 KV cache, under
// --matmul bf16 (internal to the decode kernels; not a public API).
//
// With BF16 products the prescaled query and the softmax weights are rounded to BF16 (nearest even) before they meet
// the stored rows, as llama.cpp rounds the query for its F16 cache; pairs of products are summed in fp32. Where the CPU
// has AVX512-BF16 the rounded operands are packed to BF16 and multiplied by vdpbf16ps, 32 products per instruction and
// no widening of the rows; elsewhere the same rounded values go through the fp32 kernels (the same numbers up to the
// order of the sums). Widening every row to fp32 is what bounded decode attention before: the 2-core Zen 5 read a
// BF16 cache at 8 GB/s a core, against 19 GB/s a core of plain streaming.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/attention_simd.h"

namespace kascade::detail {

/// x[0 .. n) rounded to the nearest BF16 value (ties to even), kept as floats.
inline void round_to_bf16(float* x, int n) {
    for (int i = 0; i < n; ++i) x[i] = float_from_bf16(bf16_from_float(x[i]));
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && KASCADE_SIMD_AVX2
#define KASCADE_DECODE_BF16_DOT 1

/// Register type for the decode score micro-kernel (score_block_in): operands of 32 BF16 values, multiply-added in
/// pairs into 16 fp32 lanes.
struct Bf16Pairs {
    using type = __m512;
    using operand = __m512bh;
    static constexpr int lanes = 32;
    static __m512 zero() { return _mm512_setzero_ps(); }
    static __m512bh load(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }
    static __m512 fma(__m512bh a, __m512bh b, __m512 acc) { return _mm512_dpbf16_ps(acc, a, b); }
    static vf fold(__m512 a) { return Vec<16>::fold(a); }
};

/// out[0 .. n) = the BF16 bits of x[0 .. n), whose values are BF16 already (round_to_bf16): exact; n % 16 == 0.
inline void pack_bf16(const float* x, int n, uint16_t* out) {
    for (int i = 0; i < n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
}

/// o[h][0 .. 64) (+= o's contents when `add`) = sum over kk < n of p[h][kk] * row_of(kk)[j0 .. j0 + 64) for GC query
/// heads h, where p[h] = p16 + h * ld16 holds BF16 weights with a zero at index n when n is odd, and o[h] = o + h * d
/// + j0. Two keys per step: their rows are interleaved into (key kk, key kk + 1) pairs of each column, which
/// vdpbf16ps multiplies by the pair of weights; every head of the group uses each interleaved row, so a row is read and
/// interleaved once per step. Accumulator lanes hold the columns in the interleave's order, put back at the end.
template <int GC, typename RowOf>
void weighted_rows_bf16(const RowOf& row_of, const uint16_t* p16, int ld16, int n, int d, int j0, bool add, float* o) {
    __m512 acc[GC][4];
    KASCADE_UNROLL
    for (int h = 0; h < GC; ++h) {
        KASCADE_UNROLL
        for (int c = 0; c < 4; ++c) acc[h][c] = _mm512_setzero_ps();
    }
    const auto step = [&](__m512i a0, __m512i a1, __m512i b0, __m512i b1, int kk) {
        // Pairs (a, b) of columns {0-3, 8-11, 16-19, 24-27} of each 32-column half (lo), and the others (hi).
        const __m512bh pair[4] = {reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a0, b0)),
                                  reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a0, b0)),
                                  reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a1, b1)),
                                  reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a1, b1))};
        KASCADE_UNROLL
        for (int h = 0; h < GC; ++h) {
            uint32_t w2;
            std::memcpy(&w2, p16 + static_cast<int64_t>(h) * ld16 + kk, 4);
            const __m512bh w = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(w2)));
            KASCADE_UNROLL
            for (int c = 0; c < 4; ++c) acc[h][c] = _mm512_dpbf16_ps(acc[h][c], pair[c], w);
        }
    };
    int kk = 0;
    for (; kk + 2 <= n; kk += 2) {
        const uint16_t* r0 = row_of(kk) + j0;
        const uint16_t* r1 = row_of(kk + 1) + j0;
        prefetch_bytes(row_of(std::min(kk + kPrefetchRows, n - 1)) + j0, 128);
        prefetch_bytes(row_of(std::min(kk + 1 + kPrefetchRows, n - 1)) + j0, 128);
        step(_mm512_loadu_si512(r0), _mm512_loadu_si512(r0 + 32), _mm512_loadu_si512(r1), _mm512_loadu_si512(r1 + 32),
             kk);
    }
    if (kk < n) {  // the last key of an odd count, paired with a zero row (its weight pair is (p, 0))
        const uint16_t* r0 = row_of(kk) + j0;
        const __m512i zero = _mm512_setzero_si512();
        step(_mm512_loadu_si512(r0), _mm512_loadu_si512(r0 + 32), zero, zero, kk);
    }
    // acc[h][0] lanes 4q..4q+3 hold columns 8q..8q+3, acc[h][1] lanes 4q.. columns 8q+4..; likewise [2], [3] + 32.
    const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    KASCADE_UNROLL
    for (int h = 0; h < GC; ++h) {
        float* oh = o + static_cast<int64_t>(h) * d + j0;
        const __m512 cols[4] = {
            _mm512_permutex2var_ps(acc[h][0], first, acc[h][1]), _mm512_permutex2var_ps(acc[h][0], second, acc[h][1]),
            _mm512_permutex2var_ps(acc[h][2], first, acc[h][3]), _mm512_permutex2var_ps(acc[h][2], second, acc[h][3])};
        KASCADE_UNROLL
        for (int c = 0; c < 4; ++c)
            _mm512_storeu_ps(oh + 16 * c, add ? _mm512_add_ps(_mm512_loadu_ps(oh + 16 * c), cols[c]) : cols[c]);
    }
}

/// weighted_rows_bf16 over every query head of a group and every 64 columns of a head_dim-d row (d % 64 == 0).
template <typename RowOf>
void weighted_rows_bf16_group(const RowOf& row_of, const uint16_t* p16, int ld16, int group, int n, int d, bool add,
                              float* o) {
    for (int j0 = 0; j0 < d; j0 += 64) {
        for (int g0 = 0; g0 < group; g0 += 4) {
            const uint16_t* p = p16 + static_cast<int64_t>(g0) * ld16;
            float* og = o + static_cast<int64_t>(g0) * d;
            switch (std::min(4, group - g0)) {
                case 4:
                    weighted_rows_bf16<4>(row_of, p, ld16, n, d, j0, add, og);
                    break;
                case 3:
                    weighted_rows_bf16<3>(row_of, p, ld16, n, d, j0, add, og);
                    break;
                case 2:
                    weighted_rows_bf16<2>(row_of, p, ld16, n, d, j0, add, og);
                    break;
                default:
                    weighted_rows_bf16<1>(row_of, p, ld16, n, d, j0, add, og);
                    break;
            }
        }
    }
}
#else
#define KASCADE_DECODE_BF16_DOT 0
#endif

}  // namespace kascade::detail
