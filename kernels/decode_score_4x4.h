// kernels/decode_score_4x4.h: the decode score micro-kernel of four query heads against four keys, in 16-lane
// registers (internal to the decode kernels; not a public API). It serves both products: fp32 queries against fp32
// rows (Vec<16>) or against BF16 rows split into even and odd values (Bf16Halves, queries in that order), and BF16
// queries against BF16 rows by BF16 dot products (Bf16Pairs, kernels/decode_bf16_dot.h).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/attention_simd.h"

namespace kascade::detail {

#if defined(__AVX512F__) && KASCADE_SIMD_AVX2
#define KASCADE_DECODE_SCORE_4X4 1

/// sc[g * ld + kk + j] = qs[g] . row_of(kk + j) for four query heads g < 4 and four keys j < 4 (d % O::lanes == 0;
/// qs: the heads' queries, d apart). O: the register type, Vec<16> or Bf16Pairs. Each key vector loaded (and widened)
/// is used by four heads and each query vector by four keys; the sixteen dot products are summed across their lanes
/// together: four rounds of lane-block shuffles and adds (lane l + l+8, l + l+4, l + l+2, l + l+1) leave them in one
/// register, head g's four keys in its 128-bit block g, so each head takes one 4-float store. A 4 x 2 kernel that
/// folds each dot product on its own and stores them one float at a time spent as long on its sums as on its
/// products: on a 2-core Zen 5 the 4 x 4 BF16 kernel took an anchor's scoring, pooling and top-k over 32K keys of the
/// 1B shape from 1.25 to 0.94-1.0 ms, and on a 2-vCPU Xeon the fp32 one took one thread's dense decode attention
/// over 8K keys of the 1B shape (BF16 cache in L3, exact products) from 2.36-2.66 to 1.89-2.07 ms (bench/README.md).
/// A query value stored in Bf16Halves' order (split_even_odd): a type of its own, so queries in that order reach only
/// the kernels that read them so.
struct SplitQuery {
    float value;
};

/// fp32 queries against BF16 rows without widening instructions: a 64-byte load of 32 BF16 values is split into two
/// float vectors, the even-indexed values (each the low half of a 32-bit lane, moved up by a shift) and the odd ones
/// (the high halves, by a mask); the queries are stored in the same order, each 32 values as their 16 even ones then
/// their 16 odd ones (split_even_odd). Widening each 16 values took a shuffle (vpmovzxwd) and a shift, both on the two
/// ports the multiply-adds use; the split takes a shift and a mask per 32 values. The products are the same; the
/// order of their additions differs (within the kernels' tested tolerance).
struct Bf16Halves {
    using type = __m512;
    struct operand {
        __m512 even, odd;
    };
    static constexpr int lanes = 32;
    static __m512 zero() { return _mm512_setzero_ps(); }
    /// The zero-masking shift with every lane kept is the plain instruction (GCC 12 warns about the undefined
    /// pass-through of the unmasked one, as in Vec<16>::load).
    static operand load(const uint16_t* p) {
        const __m512i x = _mm512_loadu_si512(p);
        return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, x, 16)),
                _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
    }
    static operand load(const SplitQuery* q) { return {_mm512_loadu_ps(&q[0].value), _mm512_loadu_ps(&q[16].value)}; }
    static __m512 fma(operand a, operand b, __m512 acc) {
        return _mm512_fmadd_ps(a.odd, b.odd, _mm512_fmadd_ps(a.even, b.even, acc));
    }
    static vf fold(__m512 a) { return Vec<16>::fold(a); }
};

/// Query values a decode call splits on the stack at most (split_even_odd): a group of 16 query heads of 128.
constexpr int kMaxSplitQueries = 2048;

/// out[0 .. n) = q[0 .. n) in Bf16Halves' order: per 32 values, the 16 even-indexed ones then the 16 odd ones
/// (n % 32 == 0).
inline void split_even_odd(const float* q, int n, SplitQuery* out) {
    for (int c = 0; c < n; c += 32) {
        for (int i = 0; i < 16; ++i) {
            out[c + i].value = q[c + 2 * i];
            out[c + 16 + i].value = q[c + 2 * i + 1];
        }
    }
}

/// Where a group's fp32 queries qs [group][d] can be split (d % 32 == 0, at most kMaxSplitQueries values): calls
/// score(split) with them in Bf16Halves' order, on the stack, and returns true; else returns false and calls nothing.
template <typename Score>
bool with_split_queries(const float* qs, int group, int d, Score&& score) {
    if (d % 32 != 0 || group * d > kMaxSplitQueries) return false;
    alignas(64) SplitQuery split[kMaxSplitQueries];
    split_even_odd(qs, group * d, split);
    score(static_cast<const SplitQuery*>(split));
    return true;
}

template <class O, typename Q, typename RowOf>
inline void score_4x4(const Q* qs, int d, const RowOf& row_of, int kk, float* sc, int ld) {
    using Operand = typename O::operand;
    __m512 acc[16];  // acc[4 * j + g]: key j, head g
    KASCADE_UNROLL
    for (int a = 0; a < 16; ++a) acc[a] = _mm512_setzero_ps();
    decltype(row_of(0)) rows[4];
    KASCADE_UNROLL
    for (int j = 0; j < 4; ++j) rows[j] = row_of(kk + j);
    for (int p = 0; p < d; p += O::lanes) {
        Operand kv[4];
        KASCADE_UNROLL
        for (int j = 0; j < 4; ++j) kv[j] = O::load(rows[j] + p);
        KASCADE_UNROLL
        for (int g = 0; g < 4; ++g) {
            const Operand qv = O::load(qs + g * d + p);
            KASCADE_UNROLL
            for (int j = 0; j < 4; ++j) acc[4 * j + g] = O::fma(qv, kv[j], acc[4 * j + g]);
        }
    }
    // The zero-masking forms with every lane kept: GCC 12 warns that the plain _mm512_shuffle_f32x4 and
    // _mm512_extractf32x4_ps use an uninitialised value (their unused merge operand); the instructions are the same.
    const auto blocks = [](__m512 a, __m512 b, auto imm) { return _mm512_maskz_shuffle_f32x4(0xFFFF, a, b, imm()); };
    const auto block = [](__m512 a, auto imm) { return _mm512_maskz_extractf32x4_ps(0xF, a, imm()); };
    // Sixteen lanes -> eight: r[m] holds acc[2m]'s eight partial sums in its low half, acc[2m + 1]'s in its high half.
    __m512 r[8];
    KASCADE_UNROLL
    for (int m = 0; m < 8; ++m)
        r[m] = _mm512_add_ps(blocks(acc[2 * m], acc[2 * m + 1], std::integral_constant<int, 0x44>{}),
                             blocks(acc[2 * m], acc[2 * m + 1], std::integral_constant<int, 0xEE>{}));
    // Eight -> four: 128-bit block c of s[n] holds acc[4n + c]'s four partial sums.
    __m512 s[4];
    KASCADE_UNROLL
    for (int n = 0; n < 4; ++n)
        s[n] = _mm512_add_ps(blocks(r[2 * n], r[2 * n + 1], std::integral_constant<int, 0x88>{}),
                             blocks(r[2 * n], r[2 * n + 1], std::integral_constant<int, 0xDD>{}));
    // Four -> two, inside each block c: t[i] = (acc[8i + c], acc[8i + 4 + c]) two partial sums each.
    __m512 t[2];
    KASCADE_UNROLL
    for (int i = 0; i < 2; ++i)
        t[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], 0xEE));
    // Two -> one: block c = (acc[c], acc[4 + c], acc[8 + c], acc[12 + c]) = head c's keys 0..3.
    const __m512 dots = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x88), _mm512_shuffle_ps(t[0], t[1], 0xDD));
    _mm_storeu_ps(sc + kk, block(dots, std::integral_constant<int, 0>{}));
    _mm_storeu_ps(sc + ld + kk, block(dots, std::integral_constant<int, 1>{}));
    _mm_storeu_ps(sc + 2 * static_cast<int64_t>(ld) + kk, block(dots, std::integral_constant<int, 2>{}));
    _mm_storeu_ps(sc + 3 * static_cast<int64_t>(ld) + kk, block(dots, std::integral_constant<int, 3>{}));
}
#else
#define KASCADE_DECODE_SCORE_4X4 0
#endif

}  // namespace kascade::detail
