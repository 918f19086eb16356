// kernels/attention_simd.h: internal 8-lane float vector helpers for the attention kernels (not a public API).
//
// With AVX2+FMA (the project builds with -march=native) these are thin wrappers over the intrinsics; otherwise a
// portable scalar twin with the same semantics keeps the kernels correct, only slower. Everything the kernels need
// is here: loads/stores, FMA, max, a fast exp2 and horizontal reductions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/bf16.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KASCADE_SIMD_AVX2 1
#else
#define KASCADE_SIMD_AVX2 0
#endif

// Accumulator arrays in the micro-kernels must live in registers; GCC only scalarises them when the loops over them are
// fully unrolled before its aggregate pass, hence the explicit pragma.
#if defined(__clang__)
#define KASCADE_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define KASCADE_UNROLL _Pragma("GCC unroll 16")
#else
#define KASCADE_UNROLL
#endif

namespace kascade::detail {

constexpr int kLanes = 8;  ///< floats per vector

/// The decode value kernels request the row this many rows ahead of the one in use: the hardware prefetchers alone left
/// dense decode attention reading a BF16 cache at about half the bandwidth on a 16-core Xeon, and the request made it
/// 1.3-1.5x faster at 8K keys (bench/README.md).
constexpr int kPrefetchRows = 16;

/// The score pass over gathered rows (a token-sparse decode) requests the K and the V rows of the list entry this many
/// entries ahead into L2. Scattered rows defeat the hardware prefetchers: without the requests a reuse layer's 10 % of
/// 32K keys read at about half the rate of a plain loop over the same rows (0.28-0.30 of a dense layer's time); with
/// them at 0.9-1.0 of it (0.15-0.18 of a dense layer; 2-core Zen 5, bench/README.md). 32 to 64 measured the same; an
/// extra L1 request 16 rows ahead made it slower (0.20-0.23).
constexpr int kGatherAheadRows = 32;

/// The cache level a row is requested into: L1 for rows in use shortly, L2 for rows requested far ahead, which would
/// crowd L1 before their use.
enum class CacheLevel { L1, L2 };

/// Requests the `bytes` bytes at p into `level` (a hint: the lines are not read). On x86 an asm statement per line
/// (prefetcht0 / prefetcht1): GCC deletes a loop whose body is only __builtin_prefetch calls (they have no side
/// effects), and a row of a runtime size takes such a loop; the score passes' requests were compiled away that way
/// until this was found.
template <CacheLevel level = CacheLevel::L1>
inline void prefetch_bytes(const void* p, int bytes) {
    for (int b = 0; b < bytes; b += 64) {
        const char* line = static_cast<const char*>(p) + b;
#if defined(__x86_64__) || defined(__i386__)
        if constexpr (level == CacheLevel::L2) {
            asm volatile("prefetcht1 %0" : : "m"(*line));
        } else {
            asm volatile("prefetcht0 %0" : : "m"(*line));
        }
#else
        __builtin_prefetch(line, 0, level == CacheLevel::L2 ? 2 : 3);
#endif
    }
}
constexpr float kLog2e = 1.4426950408889634f;
/// exp2's range in the vector kernels: below kExp2Min the result is 0 (no subnormals), above kExp2Max it is clamped.
constexpr float kExp2Min = -126.0f;
constexpr float kExp2Max = 127.0f;
/// The Cephes exp2f polynomial of 2^f for f in [-0.5, 0.5], highest degree first (Horner order).
constexpr int kExp2Terms = 7;
constexpr float kExp2Poly[kExp2Terms] = {1.535336188319500e-4f,
                                         1.339887440266574e-3f,
                                         9.618437357674640e-3f,
                                         5.550332471162809e-2f,
                                         2.402264791363012e-1f,
                                         6.931472028550421e-1f,
                                         1.0f};
constexpr float kLn2 = 0.6931471805599453f;

/// A KV row element as a float: fp32 as it is, BF16 widened (the scalar twin of the v_load overloads).
inline float kv_float(float x) {
    return x;
}
inline float kv_float(uint16_t h) {
    return float_from_bf16(h);
}

#if KASCADE_SIMD_AVX2

using vf = __m256;

inline vf v_zero() {
    return _mm256_setzero_ps();
}
inline vf v_set1(float x) {
    return _mm256_set1_ps(x);
}
inline vf v_bcast(const float* p) {
    return _mm256_broadcast_ss(p);
}
inline vf v_load(const float* p) {
    return _mm256_loadu_ps(p);
}
/// Eight BF16 values (a BF16 KV cache's row elements) widened to floats: each is the upper half of its float.
inline vf v_load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline void v_store(float* p, vf a) {
    _mm256_storeu_ps(p, a);
}
inline vf v_fma(vf a, vf b, vf c) {
    return _mm256_fmadd_ps(a, b, c);
}  // a*b + c
inline vf v_add(vf a, vf b) {
    return _mm256_add_ps(a, b);
}
inline vf v_sub(vf a, vf b) {
    return _mm256_sub_ps(a, b);
}
inline vf v_mul(vf a, vf b) {
    return _mm256_mul_ps(a, b);
}
inline vf v_max(vf a, vf b) {
    return _mm256_max_ps(a, b);
}
inline vf v_div(vf a, vf b) {
    return _mm256_div_ps(a, b);
}

/// Lanes where `pos` (8 ints) < `limit` take `fill`, the others keep `a`: the causal mask (query position < key).
inline vf v_mask_lt(vf a, const int* pos, int limit, float fill) {
    const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos));
    const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(limit), p));
    return _mm256_blendv_ps(a, _mm256_set1_ps(fill), m);
}

/// Lanes where `pos` (8 ints) > `limit` take `fill`, the others keep `a`: the sliding-window mask (the key is at or
/// before query position - window).
inline vf v_mask_gt(vf a, const int* pos, int limit, float fill) {
    const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos));
    const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(p, _mm256_set1_epi32(limit)));
    return _mm256_blendv_ps(a, _mm256_set1_ps(fill), m);
}

/// Lanes equal to -inf become 0, the others keep `a`.
inline vf v_neginf_to_zero(vf a) {
    const __m256 m = _mm256_cmp_ps(a, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
    return _mm256_andnot_ps(m, a);
}

/// 2^x for x <= ~0 with relative error ~2e-7; x < kExp2Min (including -inf) gives exactly 0. Cephes exp2f polynomial
/// (kExp2Poly) on the reduced argument f = x - round(x) in [-0.5, 0.5], scaled by 2^round(x) through the exponent bits.
/// Vec<16>::exp2 does the same in sixteen lanes.
inline vf v_exp2(vf x) {
    const __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(kExp2Min), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExp2Min)), _mm256_set1_ps(kExp2Max));
    const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, n);
    __m256 p = _mm256_set1_ps(kExp2Poly[0]);
    KASCADE_UNROLL
    for (int i = 1; i < kExp2Terms; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2Poly[i]));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

inline float v_hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float v_hmax(vf a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/// Each lane of a (finite) rounded to the nearest BF16 value, ties to even, as base/bf16.h rounds one float.
inline vf v_round_bf16(vf a) {
    const __m256i u = _mm256_castps_si256(a);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

/// Lane j of the result is the horizontal sum of a[j] (eight dot products finished at once).
inline vf v_hsum8(const vf* a) {
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
    const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
    const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1);
    const __m256 u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

#else  // portable twin: same operations lane by lane

struct vf {
    float x[kLanes];
};

inline vf v_zero() {
    return vf{};
}
inline vf v_set1(float a) {
    vf r;
    for (float& e : r.x) e = a;
    return r;
}
inline vf v_bcast(const float* p) {
    return v_set1(*p);
}
inline vf v_load(const float* p) {
    vf r;
    std::memcpy(r.x, p, sizeof(r.x));
    return r;
}
inline vf v_load(const uint16_t* p) {
    vf r;
    for (int j = 0; j < kLanes; ++j) r.x[j] = float_from_bf16(p[j]);
    return r;
}
inline void v_store(float* p, vf a) {
    std::memcpy(p, a.x, sizeof(a.x));
}
#define KASCADE_SIMD_LANEWISE(name, expr)       \
    inline vf name(vf a, vf b) {                \
        vf r;                                   \
        for (int j = 0; j < kLanes; ++j) {      \
            const float x = a.x[j], y = b.x[j]; \
            r.x[j] = (expr);                    \
        }                                       \
        return r;                               \
    }
KASCADE_SIMD_LANEWISE(v_add, x + y)
KASCADE_SIMD_LANEWISE(v_sub, x - y)
KASCADE_SIMD_LANEWISE(v_mul, x* y)
KASCADE_SIMD_LANEWISE(v_max, x > y ? x : y)
KASCADE_SIMD_LANEWISE(v_div, x / y)
#undef KASCADE_SIMD_LANEWISE
inline vf v_round_bf16(vf a) {
    vf r;
    for (int j = 0; j < kLanes; ++j) r.x[j] = float_from_bf16(bf16_from_float(a.x[j]));
    return r;
}
inline vf v_fma(vf a, vf b, vf c) {
    vf r;
    for (int j = 0; j < kLanes; ++j) r.x[j] = std::fma(a.x[j], b.x[j], c.x[j]);
    return r;
}
inline vf v_mask_lt(vf a, const int* pos, int limit, float fill) {
    for (int j = 0; j < kLanes; ++j)
        if (pos[j] < limit) a.x[j] = fill;
    return a;
}
inline vf v_mask_gt(vf a, const int* pos, int limit, float fill) {
    for (int j = 0; j < kLanes; ++j)
        if (pos[j] > limit) a.x[j] = fill;
    return a;
}
inline vf v_neginf_to_zero(vf a) {
    for (float& e : a.x)
        if (e == -INFINITY) e = 0.0f;
    return a;
}
inline vf v_exp2(vf a) {
    for (float& e : a.x) e = e < kExp2Min ? 0.0f : std::exp2(e);
    return a;
}
inline float v_hsum(vf a) {
    float s = 0;
    for (float e : a.x) s += e;
    return s;
}
inline float v_hmax(vf a) {
    float m = a.x[0];
    for (float e : a.x) m = e > m ? e : m;
    return m;
}
inline vf v_hsum8(const vf* a) {
    vf r;
    for (int j = 0; j < kLanes; ++j) r.x[j] = v_hsum(a[j]);
    return r;
}

#endif

// The operations the width-generic kernels use, by lanes per register: a kernel body written once over `Vec<L>` runs
// with 8-lane registers (vf) and, where the CPU has AVX-512 (x86-64-v4, Zen 4/5, Xeons since Skylake-SP), with 16-lane
// ones (vf16), chosen at compile time. A kernel that keeps one accumulator per lane does per lane the same
// multiply-adds in the same order at either width, so both give bit-identical results; the decode dot products fold
// a 16-lane sum into 8 lanes (`fold`), an order of additions of their own, within the kernels' tested tolerance.
template <int L>
struct Vec;

template <>
struct Vec<kLanes> {
    using type = vf;
    using operand = vf;
    static constexpr int lanes = kLanes;
    static vf zero() { return v_zero(); }
    static vf set1(float x) { return v_set1(x); }
    static vf load(const float* p) { return v_load(p); }
    static vf load(const uint16_t* p) { return v_load(p); }
    static void store(float* p, vf a) { v_store(p, a); }
    static vf fma(vf a, vf b, vf c) { return v_fma(a, b, c); }
    static vf mul(vf a, vf b) { return v_mul(a, b); }
    static vf add(vf a, vf b) { return v_add(a, b); }
    static vf sub(vf a, vf b) { return v_sub(a, b); }
    static vf max(vf a, vf b) { return v_max(a, b); }
    static vf exp2(vf a) { return v_exp2(a); }
    static vf round_bf16(vf a) { return v_round_bf16(a); }
    static float hsum(vf a) { return v_hsum(a); }
    static float hmax(vf a) { return v_hmax(a); }
    static vf fold(vf a) { return a; }
};

#if defined(__AVX512F__) && KASCADE_SIMD_AVX2
using vf16 = __m512;

template <>
struct Vec<16> {
    using type = vf16;
    using operand = vf16;
    static constexpr int lanes = 16;
    static vf16 zero() { return _mm512_setzero_ps(); }
    static vf16 set1(float x) { return _mm512_set1_ps(x); }
    static vf16 load(const float* p) { return _mm512_loadu_ps(p); }
    /// Sixteen BF16 values widened to floats. The zero-masking forms with every lane selected are the plain
    /// instructions; GCC 12 warns about the undefined pass-through of the unmasked ones (and of the 512-to-256 cast).
    static vf16 load(const uint16_t* p) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        constexpr __mmask16 kAll = 0xFFFF;
        return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16));
    }
    static void store(float* p, vf16 a) { _mm512_storeu_ps(p, a); }
    static vf16 fma(vf16 a, vf16 b, vf16 c) { return _mm512_fmadd_ps(a, b, c); }
    static vf16 mul(vf16 a, vf16 b) { return _mm512_mul_ps(a, b); }
    static vf16 add(vf16 a, vf16 b) { return _mm512_add_ps(a, b); }
    static vf16 sub(vf16 a, vf16 b) { return _mm512_sub_ps(a, b); }
    static vf16 max(vf16 a, vf16 b) { return _mm512_maskz_max_ps(0xFFFF, a, b); }
    /// v_exp2 in sixteen lanes: the same operations, so each lane's result is v_exp2's bit for bit.
    static vf16 exp2(vf16 x) {
        constexpr __mmask16 kAll = 0xFFFF;
        const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExp2Min), _CMP_LT_OQ);
        x = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, x, _mm512_set1_ps(kExp2Min)), _mm512_set1_ps(kExp2Max));
        const __m512 n = _mm512_maskz_roundscale_ps(kAll, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512 f = _mm512_sub_ps(x, n);
        __m512 p = _mm512_set1_ps(kExp2Poly[0]);
        KASCADE_UNROLL
        for (int i = 1; i < kExp2Terms; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2Poly[i]));
        const __m512i e = _mm512_maskz_slli_epi32(
            kAll, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll, n), _mm512_set1_epi32(127)), 23);
        return _mm512_maskz_mul_ps(static_cast<__mmask16>(~zero), p, _mm512_castsi512_ps(e));
    }
    /// v_round_bf16 in sixteen lanes.
    static vf16 round_bf16(vf16 a) {
        const __m512i u = _mm512_castps_si512(a);
        const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, u, 16), _mm512_set1_epi32(1));
        const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
        return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
    }
    static float hsum(vf16 a) { return v_hsum(fold(a)); }
    static float hmax(vf16 a) { return v_hmax(v_max(half<0>(a), half<1>(a))); }
    /// Lanes 8 I .. 8 I + 7 of a.
    template <int I>
    static vf half(vf16 a) {
        return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(a), I));
    }
    /// Lane j of the result = lane j + lane j + 8 of a: a 16-lane partial sum folded into an 8-lane one.
    static vf fold(vf16 a) { return _mm256_add_ps(half<0>(a), half<1>(a)); }
};

constexpr int kWideLanes = 16;  ///< lanes of the widest register the build has
#else
constexpr int kWideLanes = kLanes;
#endif

}  // namespace kascade::detail
