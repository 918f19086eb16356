// kernels/radix_select.cpp: select_largest. Each value becomes an unsigned key with the same order; a histogram of the
// keys' top kRadixBits bits finds the bucket holding the budget-th largest key, an nth_element over that bucket alone
// (a few percent of the keys) finds the key itself, the threshold, and one pass in index order takes every key above it
// and the first of the keys equal to it. With AVX-512 the bucket and the last pass compress 16 keys per instruction:
// scalar, taking a scattered tenth of 32K keys cost a branch miss per taken key, and the whole select took 3.5-3.8 ns
// a key (2-core Zen 5), as long as scoring the keys.
#include "kernels/radix_select.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kascade {
namespace {

constexpr int kRadixBits = 12;
constexpr int kShift = 32 - kRadixBits;

/// Order-preserving map of a float to an unsigned key after NaN -> -inf and -0 -> +0: a < b iff key(a) < key(b).
/// Branch-free, so the conversion loop vectorises.
inline uint32_t rank_key(float x) {
    const float y = x != x ? -std::numeric_limits<float>::infinity() : (x == 0.0f ? 0.0f : x);
    const uint32_t bits = std::bit_cast<uint32_t>(y);
    // Positive: set the sign bit (above every negative); negative: flip every bit (larger magnitude, smaller key).
    return bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u);
}

/// Copies the keys of keys[0 .. n) whose top bits are `bucket` to out, in order; returns how many.
int collect_bucket(const uint32_t* keys, int n, uint32_t bucket, uint32_t* out) {
    int count = 0, i = 0;
#if defined(__AVX512F__)
    // The bucket's keys are the range lo .. hi.
    const __m512i lo = _mm512_set1_epi32(static_cast<int>(bucket << kShift));
    const __m512i hi = _mm512_set1_epi32(static_cast<int>((bucket << kShift) | ((1u << kShift) - 1)));
    for (; i + 16 <= n; i += 16) {
        const __m512i k = _mm512_loadu_si512(keys + i);
        const __mmask16 in = _mm512_mask_cmple_epu32_mask(_mm512_cmpge_epu32_mask(k, lo), k, hi);
        // Compress in a register and store under a mask: a compressing store to memory is microcoded on Zen 4.
        _mm512_mask_storeu_epi32(out + count, static_cast<__mmask16>((1u << std::popcount(in)) - 1),
                                 _mm512_maskz_compress_epi32(in, k));
        count += std::popcount(in);
    }
#endif
    for (; i < n; ++i)
        if ((keys[i] >> kShift) == bucket) out[count++] = keys[i];
    return count;
}

/// Writes base + i for the keys above `threshold` and the first `ties` keys equal to it, ascending; returns how many.
int take_above(const uint32_t* keys, int n, uint32_t threshold, int ties, int base, int32_t* ids) {
    int taken = 0, i = 0;
#if defined(__AVX512F__)
    const __m512i t = _mm512_set1_epi32(static_cast<int>(threshold));
    __m512i index = _mm512_add_epi32(_mm512_set1_epi32(base),
                                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i step = _mm512_set1_epi32(16);
    for (; i + 16 <= n; i += 16) {
        const __m512i k = _mm512_loadu_si512(keys + i);
        uint32_t take = _mm512_cmpgt_epu32_mask(k, t);
        for (uint32_t eq = _mm512_cmpeq_epi32_mask(k, t); eq != 0 && ties > 0; eq &= eq - 1, --ties) take |= eq & -eq;
        _mm512_mask_storeu_epi32(ids + taken, static_cast<__mmask16>((1u << std::popcount(take)) - 1),
                                 _mm512_maskz_compress_epi32(static_cast<__mmask16>(take), index));
        taken += std::popcount(take);
        index = _mm512_add_epi32(index, step);
    }
#endif
    for (; i < n; ++i)
        if (keys[i] > threshold || (keys[i] == threshold && ties-- > 0)) ids[taken++] = base + i;
    return taken;
}

}  // namespace

int select_largest(const float* x, int n, int budget, int base, uint32_t* scratch, int32_t* ids) {
    if (budget >= n) {
        for (int i = 0; i < n; ++i) ids[i] = base + i;
        return std::max(n, 0);
    }
    if (budget <= 0) return 0;
    uint32_t* keys = scratch;
    uint32_t* bucket_keys = scratch + n;
    for (int i = 0; i < n; ++i) keys[i] = rank_key(x[i]);
    int histogram[1 << kRadixBits] = {};
    for (int i = 0; i < n; ++i) ++histogram[keys[i] >> kShift];
    int bucket = (1 << kRadixBits) - 1, above = 0;  // keys in the buckets above `bucket`
    while (above + histogram[bucket] < budget) above += histogram[bucket--];
    const int in_bucket = collect_bucket(keys, n, static_cast<uint32_t>(bucket), bucket_keys);
    const int rank = budget - above;  // the threshold is the rank-th largest key of the bucket
    std::nth_element(bucket_keys, bucket_keys + rank - 1, bucket_keys + in_bucket, std::greater<uint32_t>());
    const uint32_t threshold = bucket_keys[rank - 1];
    // nth_element leaves the keys before the threshold's place at least as large as it.
    int n_above = above;
    for (int i = 0; i < rank - 1; ++i) n_above += bucket_keys[i] > threshold;
    return take_above(keys, n, threshold, budget - n_above, base, ids);
}

}  // namespace kascade
