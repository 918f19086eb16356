// kernels/matmul_simd.h: internal micro-kernels of kernels/matmul.cpp (not a public API), one set per instruction
// path, chosen at compile time:
//   AVX512-BF16  (-march with avx512f/bw/bf16): vdpbf16ps on BF16 pairs, 16 fp32 lanes; FMA for F32/F16 weights.
//   AVX2 + FMA + F16C: BF16 widened to fp32 by a 16-bit shift, 8 fp32 lanes.
//   portable scalar: 8 partial sums in plain C++, the same lane pattern as the AVX2 path.
// Every path exposes the same interface: a micro-tile computes the kTileRows x kPanelRows dot products of kTileRows
// activation rows with kPanelRows weight rows, each as lane-wise partial sums over the input features, combined by
// the same pairwise tree (lane l + lane l + L/2, then l + L/4, ...). The tree does not depend on the tile's size or
// on which slot of the tile an element has, which is what makes the result independent of the batch size.
// The AVX-512 and AVX2 paths also have a batch tile (KASCADE_MATMUL_BATCH_TILE): a whole decode batch against part of
// a panel, column block by column block, its accumulators kept in memory in between (batch_span).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/bf16.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
#define KASCADE_MATMUL_AVX512BF16 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KASCADE_MATMUL_AVX2 1
#include <immintrin.h>
#else
#define KASCADE_MATMUL_SCALAR 1
#endif

namespace kascade::detail::matmul {

/// How a batch tile reads its weights: the weight matrix's type and, for BF16 weights, the products' precision.
enum class BatchWeights { F32, F16, Bf16Exact, Bf16 };

/// IEEE half to float, exact (every half is a float).
inline float float_from_f16(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t u;
    if (exponent == 0x1f) {
        u = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        u = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

/// Whether a tile of MR rows is the only reader of its weights: a decode row's (a decode batch's tile is batch_span).
template <int MR>
constexpr bool kStreamsWeights = MR == 1;

#if !KASCADE_MATMUL_SCALAR
/// A tile that is the only reader of its weights (kStreamsWeights) streams them from memory, and the rows of a panel
/// read side by side do not look sequential to the hardware prefetcher: so the tile prefetches the next panel (the
/// bytes after this one in the matrix) at the pace it consumes its own, `step_cols` columns of `elem`-byte weights per
/// step. Prefetches past the matrix are harmless (they never fault); the tiles of a longer block reuse their panel from
/// cache and skip this.
template <int PanelRows>
inline void prefetch_next_panel(const void* panel, int cols, size_t elem, int c, int step_cols) {
    const uintptr_t next = reinterpret_cast<uintptr_t>(panel) +
                           (PanelRows * static_cast<size_t>(cols) + PanelRows * static_cast<size_t>(c)) * elem;
    for (size_t offset = 0; offset < PanelRows * step_cols * elem; offset += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + offset), _MM_HINT_T0);
    }
}

/// A batch tile's requests at column c (batch_span): one line of each of the NR rows at `next` (byte addresses, the
/// weights its work unit reads next) per 64 bytes of columns, into L1.
template <int NR, int Elem>
[[gnu::always_inline]] inline void request_next_rows(const char* const* next, int c) {
    if (c * Elem % 64 == 0) {
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) _mm_prefetch(next[j] + c * Elem, _MM_HINT_T0);
    }
}

#endif

#if KASCADE_MATMUL_AVX512BF16

constexpr const char* kPathName = "avx512bf16";
constexpr int kTileRows = 4;      ///< activation rows per micro-tile (MR)
constexpr int kPanelRows = 6;     ///< weight rows per micro-tile (NR); 4 x 6 accumulators + 4 inputs + 1 weight fit
constexpr int kActBf16Cols = 32;  ///< converted BF16 activation rows are zero-padded to a multiple of this
/// Converted activations for BF16 weights: BF16 bits, consumed in pairs by vdpbf16ps.
using ActBf16 = uint16_t;

#define KASCADE_MATMUL_BATCH_TILE 1
/// A decode batch of kTileRows + 1 to kBatchTileRows activation rows runs as one tile over all its rows against half a
/// panel at a time (kBatchPanelRows weight rows): each weight vector is loaded, and for exact products widened, once
/// per step for every row, where two kTileRows tiles loaded it twice (8 x 3 accumulators + 3 weights + 1 input use 28
/// of the 32 registers).
constexpr int kBatchTileRows = 8;
constexpr int kBatchPanelRows = 3;
/// Columns per block of a batch tile (batch_span). Eight fp32 activation rows of 2048 columns (64 KB) do not stay in
/// L1: the tile reloaded them from L2 at every step, and a batch of 8 read its weights at 16-17 GB/s (15-16 at 8192
/// columns) where one row read them at 22-24. A block of 512 columns (16 KB of rows) stays in L1 across all the half
/// panels of a work unit: 19.7-20.4 GB/s at both widths (2-vCPU Xeon, bench/README.md).
constexpr int kBatchColumnBlock = 512;

inline __mmask16 mask16(int remaining) {
    return remaining >= 16 ? __mmask16(0xffff) : remaining <= 0 ? __mmask16(0) : __mmask16((1u << remaining) - 1);
}
inline __mmask32 mask32(int remaining) {
    return remaining >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << remaining) - 1);
}

/// One activation row rounded to BF16 (RNE), zero-padded to `padded_cols` (a multiple of kActBf16Cols); `out` is
/// 64-byte aligned.
inline void round_row_bf16(const float* x, int cols, ActBf16* out, int padded_cols) {
    for (int c = 0; c < padded_cols; c += 32) {
        const __m512 lo = _mm512_maskz_loadu_ps(mask16(cols - c), x + c);
        const __m512 hi = _mm512_maskz_loadu_ps(mask16(cols - c - 16), x + c + 16);
        _mm512_store_si512(out + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
}

/// sums[k] = canonical sum of the 16 lanes of vectors[k], k < count (a multiple of 8): lane l + lane l+8, then
/// l + l+4, l + l+2, l + l+1. (The all-ones masked forms of the shuffles are the plain instructions; they avoid GCC
/// 12's false "uninitialized" warning in the unmasked intrinsics.) Not inlined: the compiler would otherwise keep
/// the permute index in a register the micro-kernel's accumulators need.
[[gnu::noinline]] inline void reduce_lanes(const __m512* vectors, int count, float* sums) {
    // v[q] is in lane 4q of t, v[q+4] in lane 4q+1
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int group = 0; group < count; group += 8) {
        const __m512* v = vectors + group;
        __m512 r[4];
        for (int i = 0; i < 4; ++i) {  // r[i] = [v[2i] partials 0..7 | v[2i+1] partials 0..7]
            const __m512 a = v[2 * i], b = v[2 * i + 1];
            r[i] = _mm512_add_ps(_mm512_mask_shuffle_f32x4(a, 0xffff, a, b, 0x44),
                                 _mm512_mask_shuffle_f32x4(a, 0xffff, a, b, 0xee));
        }
        __m512 s[2];
        for (int i = 0; i < 2; ++i) {  // 128-bit quarter q of s[i] = 4 partials of v[4i + q]
            const __m512 a = r[2 * i], b = r[2 * i + 1];
            s[i] = _mm512_add_ps(_mm512_mask_shuffle_f32x4(a, 0xffff, a, b, 0x88),
                                 _mm512_mask_shuffle_f32x4(a, 0xffff, a, b, 0xdd));
        }
        // quarter q of z = [v[q] p0, v[q] p1, v[q+4] p0, v[q+4] p1]
        const __m512d s0 = _mm512_castps_pd(s[0]), s1 = _mm512_castps_pd(s[1]);
        const __m512 z = _mm512_add_ps(_mm512_castpd_ps(_mm512_mask_unpacklo_pd(s0, 0xff, s0, s1)),
                                       _mm512_castpd_ps(_mm512_mask_unpackhi_pd(s0, 0xff, s0, s1)));
        // quarter q of t = [v[q], v[q+4], v[q], v[q+4]]
        const __m512 t =
            _mm512_add_ps(_mm512_mask_shuffle_ps(z, 0xffff, z, z, 0x88), _mm512_mask_shuffle_ps(z, 0xffff, z, z, 0xdd));
        _mm512_mask_storeu_ps(sums + group, 0x00ff, _mm512_mask_permutexvar_ps(t, 0xffff, order, t));
    }
}

/// Floats a micro-tile writes to its output buffer: its MR x NR results, rounded up to whole 8-groups (the 4 x 6 and
/// the 8 x 3 tile both write 24).
constexpr int kTileOutputs = (kTileRows * kPanelRows + 7) / 8 * 8;
static_assert(kBatchTileRows * kBatchPanelRows <= kTileOutputs);

/// The accumulators of a batch tile (its first MR rows in use), kept in memory between its column blocks.
struct BatchTile {
    using Vector = __m512;
    Vector acc[kBatchTileRows][kBatchPanelRows];
};

/// Reduces acc[MR][NR] into out[MR][NR] (out has room for kTileOutputs floats).
template <int MR, int NR>
inline void reduce_tile(const __m512 (&acc)[MR][NR], float* out) {
    constexpr int kCount = (MR * NR + 7) / 8 * 8;
    __m512 flat[kCount];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) flat[r * NR + j] = acc[r][j];
    for (int k = MR * NR; k < kCount; ++k) flat[k] = _mm512_setzero_ps();
    reduce_lanes(flat, kCount, out);
}

/// The multiply-adds of one step of an MR x NR tile: acc[r][j] = fma(x(r), w(j), acc[r][j]). The operands of the
/// shorter side are loaded first and kept in registers while the other side's stream through one register, so each
/// operand is loaded once per step (the empty asm stops GCC from folding the streamed load into every multiply-add).
template <int MR, int NR, typename V, typename Acc, typename LoadX, typename LoadW, typename Fma>
[[gnu::always_inline]] inline void tile_step(Acc (&acc)[MR][NR], LoadX load_x, LoadW load_w, Fma fma) {
    if constexpr (MR <= NR) {
        V xv[MR];
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) xv[r] = load_x(r);
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) {
            V wv = load_w(j);
            __asm__("" : "+v"(wv));
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) acc[r][j] = fma(acc[r][j], xv[r], wv);
        }
    } else {
        V wv[NR];
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) wv[j] = load_w(j);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
            V xv = load_x(r);
            __asm__("" : "+v"(xv));
#pragma GCC unroll 6
            for (int j = 0; j < NR; ++j) acc[r][j] = fma(acc[r][j], xv, wv[j]);
        }
    }
}

/// The steps of an MR x NR tile of BF16 products over columns [c_begin, c_end) (c_begin a multiple of 32; the last,
/// masked step only where c_end is cols) into acc; x rows (stride x_stride) are padded and 64-byte aligned,
/// `request(c)` runs before each step (the tile's requests for the weights it reads later).
template <int MR, int NR, typename Request>
[[gnu::always_inline]] inline void bf16_span(const ActBf16* x, size_t x_stride, const uint16_t* const* w, int cols,
                                             int c_begin, int c_end, __m512 (&acc)[MR][NR], Request request) {
    // Inlined by force: a step GCC left out of line took the accumulators through memory.
    auto step = [&](int c, __mmask32 mask) __attribute__((always_inline)) {
        request(c);
        tile_step<MR, NR, __m512bh>(
            acc, [&](int r) { return reinterpret_cast<__m512bh>(_mm512_load_si512(x + r * x_stride + c)); },
            [&](int j) { return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, w[j] + c)); },
            [](__m512 a, __m512bh xv, __m512bh wv) { return _mm512_dpbf16_ps(a, xv, wv); });
    };
    const int full = std::min(c_end, cols / 32 * 32);
    for (int c = c_begin; c < full; c += 32) step(c, mask32(32));
    if (c_end == cols && full < cols) step(full, mask32(cols - full));
}

/// The same over fp32 activations: `load_w(j, c, mask)` gives 16 fp32 weights of row j from column c (c_begin a
/// multiple of 16).
template <int MR, int NR, typename LoadW, typename Request>
[[gnu::always_inline]] inline void fp32_span(const float* x, size_t x_stride, int cols, int c_begin, int c_end,
                                             __m512 (&acc)[MR][NR], LoadW load_w, Request request) {
    auto step = [&](int c, __mmask16 mask) __attribute__((always_inline)) {  // as in bf16_span
        request(c);
        tile_step<MR, NR, __m512>(
            acc, [&](int r) { return _mm512_maskz_loadu_ps(mask, x + r * x_stride + c); },
            [&](int j) { return load_w(j, c, mask); },
            [](__m512 a, __m512 xv, __m512 wv) { return _mm512_fmadd_ps(xv, wv, a); });
    };
    const int full = std::min(c_end, cols / 16 * 16);
    for (int c = c_begin; c < full; c += 16) step(c, mask16(16));
    if (c_end == cols && full < cols) step(full, mask16(cols - full));
}

template <int MR, int NR>
inline void zero_tile(__m512 (&acc)[MR][NR]) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) acc[r][j] = _mm512_setzero_ps();
}

/// out[r][j] = x row r . w row j over `cols` BF16 pairs; x rows (stride x_stride) are padded and 64-byte aligned.
template <int MR, int NR = kPanelRows>
void dot_tile_bf16(const ActBf16* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    __m512 acc[MR][NR];
    zero_tile(acc);
    bf16_span(
        x, x_stride, w, cols, 0, cols, acc, [&](int c) __attribute__((always_inline)) {
            if constexpr (kStreamsWeights<MR>) prefetch_next_panel<NR>(w[0], cols, 2, c, 32);
        });
    reduce_tile<MR, NR>(acc, out);
}

/// Shared body of the F32 and F16 tiles: `load_w(j, c, mask)` gives 16 fp32 weights of row j from column c.
template <int MR, int NR, typename LoadW>
void dot_tile_fp32_body(const float* x, size_t x_stride, int cols, float* out, const void* panel, size_t elem,
                        LoadW load_w) {
    __m512 acc[MR][NR];
    zero_tile(acc);
    fp32_span(
        x, x_stride, cols, 0, cols, acc, load_w, [&](int c) __attribute__((always_inline)) {
            if constexpr (kStreamsWeights<MR>) prefetch_next_panel<NR>(panel, cols, elem, c, 16);
        });
    reduce_tile<MR, NR>(acc, out);
}

template <int MR, int NR = kPanelRows>
void dot_tile_f32(const float* x, size_t x_stride, const float* const* w, int cols, float* out) {
    dot_tile_fp32_body<MR, NR>(x, x_stride, cols, out, w[0], 4,
                               [w](int j, int c, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, w[j] + c); });
}

/// The 16 F16 values at p (lanes past `mask` zero) as fp32, exact.
inline __m512 load_f16_as_f32(const uint16_t* p, __mmask16 mask) {
    return _mm512_maskz_cvtph_ps(mask, _mm256_maskz_loadu_epi16(mask, p));
}

/// The 16 BF16 values at p (lanes past `mask` zero) as fp32: a BF16 value is the top half of its fp32 bits.
inline __m512 load_bf16_as_f32(const uint16_t* p, __mmask16 mask) {
    // The zero-masked forms (lanes past `mask` are zero anyway): GCC 12's unmasked ones start from
    // _mm512_undefined_epi32() and trip -Wmaybe-uninitialized.
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(mask, wide, 16));
}

template <int MR, int NR = kPanelRows>
void dot_tile_f16(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    dot_tile_fp32_body<MR, NR>(x, x_stride, cols, out, w[0], 2,
                               [w](int j, int c, __mmask16 mask) { return load_f16_as_f32(w[j] + c, mask); });
}

/// BF16 weights widened to fp32 times fp32 activations.
template <int MR, int NR = kPanelRows>
void dot_tile_bf16_exact(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    dot_tile_fp32_body<MR, NR>(x, x_stride, cols, out, w[0], 2,
                               [w](int j, int c, __mmask16 mask) { return load_bf16_as_f32(w[j] + c, mask); });
}

/// Columns [c_begin, c_end) of a batch tile: the MR activation rows x (stride x_stride; for BatchWeights::Bf16 the
/// converted rows, else fp32) against the kBatchPanelRows weight rows w, added to tile's accumulators (zeroed before
/// its first block, reduced with reduce_batch_tile after its last). Each step requests the same columns of the rows at
/// `next` (byte addresses: the weights its work unit reads next), one line per 64 bytes, into L1. The accumulators
/// run through the same multiply-adds in the same order as in a dot_tile over all columns: the same results.
template <int MR, BatchWeights K>
void batch_span(const void* x, size_t x_stride, const void* const* w, int cols, int c_begin, int c_end, BatchTile& tile,
                const char* const* next) {
    constexpr int NR = kBatchPanelRows;
    constexpr int kElem = K == BatchWeights::F32 ? 4 : 2;
    __m512 acc[MR][NR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) acc[r][j] = tile.acc[r][j];
    const auto request = [next](int c) __attribute__((always_inline)) {
        request_next_rows<NR, kElem>(next, c);
    };
    if constexpr (K == BatchWeights::Bf16) {
        const auto* rows = reinterpret_cast<const uint16_t* const*>(w);
        bf16_span(static_cast<const ActBf16*>(x), x_stride, rows, cols, c_begin, c_end, acc, request);
    } else {
        const auto load_w = [w](int j, int c, __mmask16 mask) {
            if constexpr (K == BatchWeights::F32)
                return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(w[j]) + c);
            if constexpr (K == BatchWeights::F16) return load_f16_as_f32(static_cast<const uint16_t*>(w[j]) + c, mask);
            if constexpr (K == BatchWeights::Bf16Exact)
                return load_bf16_as_f32(static_cast<const uint16_t*>(w[j]) + c, mask);
        };
        fp32_span(static_cast<const float*>(x), x_stride, cols, c_begin, c_end, acc, load_w, request);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) tile.acc[r][j] = acc[r][j];
}

/// dst[c] = w[c] widened to fp32 (F16 when `f16`, else BF16), c < cols, as the tiles above widen it: dot_tile_f32 on
/// dst is then bitwise dot_tile_f16 / dot_tile_bf16_exact on w.
inline void widen_row(const uint16_t* w, int cols, bool f16, float* dst) {
    for (int c = 0; c < cols; c += 16) {
        const __mmask16 mask = mask16(cols - c);
        _mm512_mask_storeu_ps(dst + c, mask, f16 ? load_f16_as_f32(w + c, mask) : load_bf16_as_f32(w + c, mask));
    }
}

#elif KASCADE_MATMUL_AVX2

constexpr const char* kPathName = "avx2";
constexpr int kTileRows = 3;
constexpr int kPanelRows = 4;  ///< 3 x 4 accumulators + inputs fit the 16 ymm registers
constexpr int kActBf16Cols = 8;

#define KASCADE_MATMUL_BATCH_TILE 1
/// A decode batch of kTileRows + 1 to kBatchTileRows activation rows runs as one batch tile against half a panel
/// (kBatchPanelRows weight rows) a column block at a time, as on the AVX-512 path. 16 registers hold 4 rows x 2
/// weight rows (8 accumulators, 2 weights, 1 input), so the tile runs its rows kBatchRowGroup at a time over each
/// block: the first group reads the weights from memory, the second from L1. The micro-tiles (kTileRows rows each) over
/// a batch of 8 instead read each activation row and each weight (widened once per panel into a buffer) from L2.
constexpr int kBatchTileRows = 8;
constexpr int kBatchPanelRows = 2;
constexpr int kBatchRowGroup = 4;
/// Columns per block of a batch tile: eight fp32 activation rows of 512 columns (16 KB) stay in L1 with the weights
/// streaming past them.
constexpr int kBatchColumnBlock = 512;
/// Floats a micro-tile writes to its output buffer: 12 for the 3 x 4 tile, 16 for the 8 x 2 batch tile.
constexpr int kTileOutputs = kBatchTileRows * kBatchPanelRows;
/// Converted activations for BF16 weights: fp32 values already rounded to BF16, so only weights are widened.
using ActBf16 = float;

inline void round_row_bf16(const float* x, int cols, ActBf16* out, int padded_cols) {
    for (int c = 0; c < cols; ++c) out[c] = float_from_bf16(bf16_from_float(x[c]));
    for (int c = cols; c < padded_cols; ++c) out[c] = 0.0f;
}

inline __m256i mask8(int remaining) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(remaining), lane);
}

/// out[k] = canonical sum of the 8 lanes of v[k], k < 8: lane l + l+4, then l + l+2, then l + l+1.
inline void reduce8(const __m256* v, float* out) {
    __m256 r[4];
    for (int i = 0; i < 4; ++i) {  // r[i] = [v[2i] partials 0..3, v[2i+1] partials 0..3]
        const __m256 a = v[2 * i], b = v[2 * i + 1];
        r[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    __m256 s[2];
    for (int i = 0; i < 2; ++i) {  // s[i] = [v[4i] p0 p1, v[4i+2] p0 p1 | v[4i+1] p0 p1, v[4i+3] p0 p1]
        const __m256d a = _mm256_castps_pd(r[2 * i]), b = _mm256_castps_pd(r[2 * i + 1]);
        s[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    // [v0, v2, v4, v6 | v1, v3, v5, v7]
    const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(s[0], s[1], 0x88), _mm256_shuffle_ps(s[0], s[1], 0xdd));
    _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

template <int MR, int NR>
inline void reduce_tile(const __m256 (&acc)[MR][NR], float* out) {
    for (int k0 = 0; k0 < MR * NR; k0 += 8) {
        __m256 flat[8];
        for (int k = 0; k < 8; ++k)
            flat[k] = k0 + k < MR * NR ? acc[(k0 + k) / NR][(k0 + k) % NR] : _mm256_setzero_ps();
        float buffer[8];
        reduce8(flat, buffer);
        std::memcpy(out + k0, buffer, sizeof(float) * std::min(8, MR * NR - k0));
    }
}

/// Shared body: `load_x(r, c, mask)` and `load_w(j, c, mask)` give 8 fp32 values from column c.
template <int MR, int NR, typename LoadX, typename LoadW>
void dot_tile_body(int cols, float* out, const void* panel, size_t elem, LoadX load_x, LoadW load_w) {
    __m256 acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j) acc[r][j] = _mm256_setzero_ps();
    const int full = cols / 8 * 8;
    auto step = [&](int c, int remaining) {
        if constexpr (kStreamsWeights<MR>) prefetch_next_panel<NR>(panel, cols, elem, c, 8);
        __m256 xv[MR];
        // One load per operand and step (the empty asm keeps each in a register): GCC folded the loads into the
        // multiply-adds, loading an operand once per multiply-add that uses it.
        for (int r = 0; r < MR; ++r) {
            __m256 v = load_x(r, c, remaining);
            __asm__("" : "+x"(v));
            xv[r] = v;
        }
        for (int j = 0; j < NR; ++j) {
            __m256 wv = load_w(j, c, remaining);
            __asm__("" : "+x"(wv));
            for (int r = 0; r < MR; ++r) acc[r][j] = _mm256_fmadd_ps(xv[r], wv, acc[r][j]);
        }
    };
    for (int c = 0; c < full; c += 8) step(c, 8);
    if (full < cols) step(full, cols - full);
    reduce_tile<MR, NR>(acc, out);
}

/// 8 16-bit values from p; fewer than 8 remaining are read into a zero-padded copy (no read past the matrix).
inline __m128i load_u16x8(const uint16_t* p, int remaining) {
    if (remaining >= 8) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    uint16_t tail[8] = {};
    std::memcpy(tail, p, sizeof(uint16_t) * remaining);
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(tail));
}

inline __m256 load_f32x8(const float* p, int remaining) {
    return remaining >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask8(remaining));
}

/// The 8 BF16 values at p (past `remaining`: zero) as fp32: a BF16 value is the top half of its fp32 bits.
inline __m256 load_bf16_as_f32(const uint16_t* p, int remaining) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_u16x8(p, remaining)), 16));
}

/// The 8 F16 values at p (past `remaining`: zero) as fp32, exact.
inline __m256 load_f16_as_f32(const uint16_t* p, int remaining) {
    return _mm256_cvtph_ps(load_u16x8(p, remaining));
}

template <int MR, int NR = kPanelRows>
void dot_tile_bf16(const ActBf16* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    dot_tile_body<MR, NR>(
        cols, out, w[0], 2, [&](int r, int c, int) { return _mm256_load_ps(x + r * x_stride + c); },
        [&](int j, int c, int remaining) { return load_bf16_as_f32(w[j] + c, remaining); });
}

template <int MR, int NR = kPanelRows>
void dot_tile_f32(const float* x, size_t x_stride, const float* const* w, int cols, float* out) {
    dot_tile_body<MR, NR>(
        cols, out, w[0], 4, [&](int r, int c, int remaining) { return load_f32x8(x + r * x_stride + c, remaining); },
        [&](int j, int c, int remaining) { return load_f32x8(w[j] + c, remaining); });
}

template <int MR, int NR = kPanelRows>
void dot_tile_f16(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    dot_tile_body<MR, NR>(
        cols, out, w[0], 2, [&](int r, int c, int remaining) { return load_f32x8(x + r * x_stride + c, remaining); },
        [&](int j, int c, int remaining) { return load_f16_as_f32(w[j] + c, remaining); });
}

template <int MR, int NR = kPanelRows>
void dot_tile_bf16_exact(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    dot_tile_body<MR, NR>(
        cols, out, w[0], 2, [&](int r, int c, int remaining) { return load_f32x8(x + r * x_stride + c, remaining); },
        [&](int j, int c, int remaining) { return load_bf16_as_f32(w[j] + c, remaining); });
}

/// The accumulators of a batch tile (its first MR rows in use), kept in memory between its column blocks.
struct BatchTile {
    using Vector = __m256;
    Vector acc[kBatchTileRows][kBatchPanelRows];
};

/// Columns [c_begin, c_end) of rows [R0, R0 + G) of a batch tile (see batch_span), G <= kBatchRowGroup; `request(c)`
/// runs before each step.
template <int R0, int G, BatchWeights K, typename Request>
[[gnu::always_inline]] inline void batch_group_span(const void* x, size_t x_stride, const void* const* w, int cols,
                                                    int c_begin, int c_end, BatchTile& tile, Request request) {
    constexpr int NR = kBatchPanelRows;
    __m256 acc[G][NR];
    for (int r = 0; r < G; ++r)
        for (int j = 0; j < NR; ++j) acc[r][j] = tile.acc[R0 + r][j];
    const auto load_w = [w](int j, int c, int remaining) {
        if constexpr (K == BatchWeights::F32) return load_f32x8(static_cast<const float*>(w[j]) + c, remaining);
        if constexpr (K == BatchWeights::F16) return load_f16_as_f32(static_cast<const uint16_t*>(w[j]) + c, remaining);
        if constexpr (K == BatchWeights::Bf16Exact || K == BatchWeights::Bf16)
            return load_bf16_as_f32(static_cast<const uint16_t*>(w[j]) + c, remaining);
    };
    // BF16 products read the activations rounded to BF16 (already fp32 here, zero-padded to whole vectors).
    const float* xr = static_cast<const float*>(x) + R0 * x_stride;
    auto step = [&](int c, int remaining) __attribute__((always_inline)) {
        request(c);
        __m256 wv[NR];
        for (int j = 0; j < NR; ++j) wv[j] = load_w(j, c, remaining);
        for (int r = 0; r < G; ++r) {
            __m256 xv = load_f32x8(xr + r * x_stride + c, remaining);
            __asm__("" : "+x"(xv));  // one load per row and step, as in dot_tile_body
            for (int j = 0; j < NR; ++j) acc[r][j] = _mm256_fmadd_ps(xv, wv[j], acc[r][j]);
        }
    };
    const int full = std::min(c_end, cols / 8 * 8);
    for (int c = c_begin; c < full; c += 8) step(c, 8);
    if (c_end == cols && full < cols) step(full, cols - full);
    for (int r = 0; r < G; ++r)
        for (int j = 0; j < NR; ++j) tile.acc[R0 + r][j] = acc[r][j];
}

/// Columns [c_begin, c_end) of a batch tile: the MR activation rows x (stride x_stride; for BatchWeights::Bf16 the
/// converted rows, else fp32) against the kBatchPanelRows weight rows w, added to tile's accumulators (zeroed before
/// its first block, reduced with reduce_batch_tile after its last). The first row group requests the same columns of
/// the rows at `next` (byte addresses: the weights its work unit reads next), one line per 64 bytes, into L1. The
/// accumulators run through the same multiply-adds in the same order as in a dot_tile over all columns: the same
/// results.
template <int MR, BatchWeights K>
void batch_span(const void* x, size_t x_stride, const void* const* w, int cols, int c_begin, int c_end, BatchTile& tile,
                const char* const* next) {
    constexpr int kElem = K == BatchWeights::F32 ? 4 : 2;
    const auto request = [next](int c) __attribute__((always_inline)) {
        request_next_rows<kBatchPanelRows, kElem>(next, c);
    };
    const auto no_request = [](int) {};
    constexpr int kFirst = std::min(MR, kBatchRowGroup);
    batch_group_span<0, kFirst, K>(x, x_stride, w, cols, c_begin, c_end, tile, request);
    if constexpr (MR > kBatchRowGroup)
        batch_group_span<kBatchRowGroup, MR - kBatchRowGroup, K>(x, x_stride, w, cols, c_begin, c_end, tile,
                                                                 no_request);
}

/// dst[c] = w[c] widened to fp32 (F16 when `f16`, else BF16), c < cols, as the tiles above widen it: dot_tile_f32 on
/// dst is then bitwise dot_tile_f16 / dot_tile_bf16_exact on w.
inline void widen_row(const uint16_t* w, int cols, bool f16, float* dst) {
    for (int c = 0; c < cols; c += 8) {
        const int remaining = cols - c;
        const __m256 v = f16 ? load_f16_as_f32(w + c, remaining) : load_bf16_as_f32(w + c, remaining);
        if (remaining >= 8) {
            _mm256_storeu_ps(dst + c, v);
        } else {
            _mm256_maskstore_ps(dst + c, mask8(remaining), v);
        }
    }
}

#else  // portable scalar

constexpr const char* kPathName = "scalar";
#define KASCADE_MATMUL_BATCH_TILE 0
constexpr int kTileRows = 1;
constexpr int kPanelRows = 4;
constexpr int kActBf16Cols = 8;
constexpr int kTileOutputs = kTileRows * kPanelRows;
using ActBf16 = float;

inline void round_row_bf16(const float* x, int cols, ActBf16* out, int padded_cols) {
    for (int c = 0; c < cols; ++c) out[c] = float_from_bf16(bf16_from_float(x[c]));
    for (int c = cols; c < padded_cols; ++c) out[c] = 0.0f;
}

/// One dot product as 8 lane-wise partial sums (lane l holds the features c with c % 8 == l), combined by the tree
/// l + l+4, l + l+2, l + l+1: the AVX2 path's order. `weight(c)` gives W[c] as float.
template <typename Weight>
float dot_lanes(const float* x, int cols, Weight weight) {
    float lane[8] = {};
    for (int c = 0; c < cols; ++c) lane[c % 8] += x[c] * weight(c);
    float half[4], quarter[2];
    for (int l = 0; l < 4; ++l) half[l] = lane[l] + lane[l + 4];
    for (int l = 0; l < 2; ++l) quarter[l] = half[l] + half[l + 2];
    return quarter[0] + quarter[1];
}

template <int MR, int NR = kPanelRows>
void dot_tile_bf16(const ActBf16* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j)
            out[r * NR + j] = dot_lanes(x + r * x_stride, cols, [&](int c) { return float_from_bf16(w[j][c]); });
}

template <int MR, int NR = kPanelRows>
void dot_tile_f32(const float* x, size_t x_stride, const float* const* w, int cols, float* out) {
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j)
            out[r * NR + j] = dot_lanes(x + r * x_stride, cols, [&](int c) { return w[j][c]; });
}

template <int MR, int NR = kPanelRows>
void dot_tile_f16(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j)
            out[r * NR + j] = dot_lanes(x + r * x_stride, cols, [&](int c) { return float_from_f16(w[j][c]); });
}

template <int MR, int NR = kPanelRows>
void dot_tile_bf16_exact(const float* x, size_t x_stride, const uint16_t* const* w, int cols, float* out) {
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < NR; ++j)
            out[r * NR + j] = dot_lanes(x + r * x_stride, cols, [&](int c) { return float_from_bf16(w[j][c]); });
}

/// dst[c] = w[c] widened to fp32 (F16 when `f16`, else BF16), c < cols, as the tiles above widen it.
inline void widen_row(const uint16_t* w, int cols, bool f16, float* dst) {
    for (int c = 0; c < cols; ++c) dst[c] = f16 ? float_from_f16(w[c]) : float_from_bf16(w[c]);
}

#endif

#if KASCADE_MATMUL_BATCH_TILE
/// out[r][j] (kBatchPanelRows per row) = the dot products of a batch tile's first MR rows, from its accumulators.
template <int MR>
void reduce_batch_tile(const BatchTile& tile, float* out) {
    BatchTile::Vector acc[MR][kBatchPanelRows];
    for (int r = 0; r < MR; ++r)
        for (int j = 0; j < kBatchPanelRows; ++j) acc[r][j] = tile.acc[r][j];
    reduce_tile<MR, kBatchPanelRows>(acc, out);
}
#endif

}  // namespace kascade::detail::matmul
