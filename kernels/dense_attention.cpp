// kernels/dense_attention.cpp: dense causal prefill and decode, plus the shared prefill and decode drivers that the
// pooling and sparse kernels reuse (declared in kernels/attention_engine.h).
#include "kernels/dense_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "kernels/attention_engine.h"
#include "kernels/attention_simd.h"
#include "kernels/decode_bf16_dot.h"
#include "kernels/decode_score_4x4.h"
#include "kernels/decode_softmax.h"
#include "kernels/weighted_rows.h"

namespace kascade {
namespace detail {
namespace {

constexpr int kKeyBlock = 64;      ///< keys per score block of the dense prefill
constexpr int kDecodePiece = 256;  ///< keys per decode work piece (fixed: results do not depend on thread count)

/// Query rows per dense work item: about 128 columns (rows x group) keep the score block and the transposed queries
/// in L1/L2 while amortising each K/V block over many queries.
int dense_query_rows(int group) {
    return std::max(16, round_up(128 / group, 16));
}

/// Pools the per-(key sub-tile, column) partial sums of one work item into mass rows. partial[kt][c] was summed
/// with the running max snap[block][c]; w rescales it to the final softmax (exp2(snap - m) / l). Key blocks before
/// key_begin were skipped (outside every row's window): their mass stays 0.
void pool_block_mass(const QueryBlock& b, int kv_head, int row0, int key_block, int tile, int key_begin, int n_vis,
                     const float* partial, const float* snap, float* w, TileMass* mass) {
    const int n_blocks = tile_count(n_vis, key_block);
    const int tiles_per_block = key_block / tile;
    const int q_tile0 = row0 / tile;
    const int n_local_tiles = tile_count(b.n_rows, tile);
    for (int blk = key_begin / key_block; blk < n_blocks; ++blk) {
        for (int c = 0; c < b.n_cols; ++c) w[c] = std::exp2(snap[blk * b.n_pad + c] - b.m[c]) / b.l[c];
        const int kt_end = std::min(tile_count(n_vis, tile), (blk + 1) * tiles_per_block);
        for (int kt = blk * tiles_per_block; kt < kt_end; ++kt) {
            const float* pk = partial + static_cast<int64_t>(kt) * b.n_pad;
            for (int lt = 0; lt < n_local_tiles; ++lt) {
                const int qt = q_tile0 + lt;
                if (kt > qt || kt < first_window_tile(qt, tile, b.window)) continue;
                const int i1 = std::min(b.n_rows, (lt + 1) * tile);
                double sum = 0;
                for (int g = 0; g < b.group; ++g)
                    for (int i = lt * tile; i < i1; ++i) sum += pk[g * b.n_rows + i] * w[g * b.n_rows + i];
                mass->row(kv_head, qt)[kt] = static_cast<float>(sum);
            }
        }
    }
}

/// Where one decode piece starts in the range list and how many keys it holds.
struct DecodePiece {
    int kv_head = 0;
    int range = 0;   ///< first range (decode_pass_gathered: first list entry)
    int offset = 0;  ///< first key inside that range
    int n_keys = 0;
};

template <typename F>
void for_each_part(const DecodePiece& piece, const KeyRange* ranges, F&& f) {
    int r = piece.range, off = piece.offset, left = piece.n_keys, idx = 0;
    while (left > 0) {
        const int len = std::min(left, ranges[r].len - off);
        f(ranges[r].start + off, len, idx);
        idx += len;
        left -= len;
        ++r;
        off = 0;
    }
}

/// The value rows of a decode piece as runs: the returned runs(f) calls f(row_of, idx, len) for each run of len
/// consecutive keys of the piece from its idx-th on, row_of(kk) being the row of its (idx + kk)-th key.
template <typename T>
auto piece_runs(const DecodePiece& piece, const KeyRange* ranges, const T* v, int d) {
    return [&piece, ranges, v, d](const auto& f) {
        for_each_part(piece, ranges, [&](int start, int len, int idx) {
            const T* vr = v + static_cast<int64_t>(start) * d;
            f([vr, d](int kk) { return vr + static_cast<int64_t>(kk) * d; }, idx, len);
        });
    };
}

/// The same for a piece of n gathered keys: one run, row_of(kk) = v[keys[kk]].
template <typename T>
auto gathered_runs(const int32_t* keys, int n, const T* v, int d) {
    return [keys, n, v, d](const auto& f) {
        f([keys, v, d](int kk) { return v + static_cast<int64_t>(keys[kk]) * d; }, 0, n);
    };
}

// Decode scores: sc[g * ld + kk] = qs[g] . row_of(kk) for the group's query heads g and keys kk < n. Micro-kernels
// take GC query heads against NK keys (GC * NK <= 8 accumulators): each key vector loaded is used by GC heads and each
// query vector by NK keys, and one transposing reduction finishes the GC * NK dot products. O is the register type:
// Vec<L> on float queries (row_of returns a float or a BF16 row; Vec::load widens the latter), Bf16Halves on split
// float queries (SplitQuery) against BF16 rows, or Bf16Pairs on BF16 queries against BF16 rows.
template <class O, int GC, int NK, typename Q, typename RowOf>
inline void score_block_in(const Q* qs, int d, const RowOf& row_of, int kk, float* sc, int ld) {
    static_assert(GC * NK <= kLanes);
    using V = typename O::type;
    using Operand = typename O::operand;
    V acc[GC * NK];
    KASCADE_UNROLL
    for (int a = 0; a < GC * NK; ++a) acc[a] = O::zero();
    decltype(row_of(0)) rows[NK];
    KASCADE_UNROLL
    for (int j = 0; j < NK; ++j) rows[j] = row_of(kk + j);
    for (int p = 0; p < d; p += O::lanes) {
        Operand kv[NK];
        KASCADE_UNROLL
        for (int j = 0; j < NK; ++j) kv[j] = O::load(rows[j] + p);
        KASCADE_UNROLL
        for (int g = 0; g < GC; ++g) {
            const Operand qv = O::load(qs + g * d + p);
            KASCADE_UNROLL
            for (int j = 0; j < NK; ++j) acc[j * GC + g] = O::fma(qv, kv[j], acc[j * GC + g]);
        }
    }
    vf sums[kLanes];  // each dot product's partial sums in 8 lanes, for one transposing reduction
    KASCADE_UNROLL
    for (int a = 0; a < kLanes; ++a) sums[a] = a < GC * NK ? O::fold(acc[a]) : v_zero();
    alignas(32) float dots[kLanes];
    v_store(dots, v_hsum8(sums));
    for (int j = 0; j < NK; ++j)
        for (int g = 0; g < GC; ++g) sc[g * ld + kk + j] = dots[j * GC + g];
}

/// Whether decode_scores_of scores four heads by four keys at a time (score_4x4) for queries of type Q: BF16 queries
/// where the CPU has BF16 dot products, fp32 ones where it has 16-lane registers (in 8-lane ones the 4 x 4 kernel's
/// accumulators would not fit the registers).
template <typename Q>
constexpr bool kScores4x4 = std::is_same_v<Q, uint16_t> ? KASCADE_DECODE_BF16_DOT : KASCADE_DECODE_SCORE_4X4;

/// The register type of the queries that are not plain floats: BF16 queries (uint16_t) take BF16 dot products,
/// split fp32 ones (SplitQuery, against BF16 rows) Bf16Halves.
template <typename Q>
struct QueryOperand;
#if KASCADE_DECODE_BF16_DOT
template <>
struct QueryOperand<uint16_t> {
    using type = Bf16Pairs;
};
#endif
#if KASCADE_DECODE_SCORE_4X4
template <>
struct QueryOperand<SplitQuery> {
    using type = Bf16Halves;
};
#endif

/// fp32 queries in the widest registers where head_dim is a whole number of them, others in their QueryOperand; four
/// heads by four keys take score_4x4.
template <int GC, int NK, typename Q, typename RowOf>
inline void score_block(const Q* qs, int d, const RowOf& row_of, int kk, float* sc, int ld) {
    if constexpr (!std::is_same_v<Q, float>) {
        using O = typename QueryOperand<Q>::type;
        if constexpr (GC == 4 && NK == 4) {
            score_4x4<O>(qs, d, row_of, kk, sc, ld);
        } else {
            score_block_in<O, GC, NK>(qs, d, row_of, kk, sc, ld);
        }
    } else if constexpr (GC == 4 && NK == 4 && KASCADE_DECODE_SCORE_4X4) {
#if KASCADE_DECODE_SCORE_4X4
        score_4x4<Vec<16>>(qs, d, row_of, kk, sc, ld);  // decode_scores_of takes it only where d % 16 == 0
#endif
    } else if (d % kWideLanes == 0) {
        score_block_in<Vec<kWideLanes>, GC, NK>(qs, d, row_of, kk, sc, ld);
    } else {
        score_block_in<Vec<kLanes>, GC, NK>(qs, d, row_of, kk, sc, ld);
    }
}

/// score_block<GC, NK> over keys kk, kk + NK, ... while NK of them are left (kk is left at the first key not scored).
/// Each block requests the rows kPrefetchRows on into L1, as the value kernels do: on a Xeon the hardware prefetchers
/// alone left the anchor's pass over every key of a BF16 cache (decode_token_mass) at 4.0 ms for 32K keys of the 1B
/// shape, and the requests took it to 2.8-3.0 ms (bench/README.md).
template <int GC, int NK, typename Q, typename RowOf>
inline void score_blocks(const Q* qs, int d, const RowOf& row_of, int n, float* sc, int ld, int& kk) {
    const int row_bytes = d * static_cast<int>(sizeof(*row_of(0)));
    for (; kk + NK <= n; kk += NK) {
        const int last = std::min(kk + kPrefetchRows + NK, n);
        for (int j = kk + kPrefetchRows; j < last; ++j) prefetch_bytes(row_of(j), row_bytes);
        score_block<GC, NK>(qs, d, row_of, kk, sc, ld);
    }
}

/// decode_scores over consecutive rows.
template <typename Q, typename RowOf>
void decode_scores_of(const Q* qs, int group, int d, const RowOf& row_of, int n, float* sc, int ld) {
    // Query heads in chunks of up to four: 4 x 4 (kScores4x4) or 4 x 2, 3 x 2, 2 x 4 or 1 x 8 (heads x keys) per
    // micro-kernel, the keys left over one at a time.
    for (int g0 = 0; g0 < group; g0 += 4) {
        const Q* q0 = qs + static_cast<int64_t>(g0) * d;
        float* s0 = sc + static_cast<int64_t>(g0) * ld;
        int kk = 0;
        switch (std::min(4, group - g0)) {
            case 4:
                if constexpr (kScores4x4<Q>) {
                    if (d % 16 == 0) score_blocks<4, 4>(q0, d, row_of, n, s0, ld, kk);  // BF16 products: d % 64 == 0
                }
                score_blocks<4, 2>(q0, d, row_of, n, s0, ld, kk);
                score_blocks<4, 1>(q0, d, row_of, n, s0, ld, kk);
                break;
            case 3:
                score_blocks<3, 2>(q0, d, row_of, n, s0, ld, kk);
                score_blocks<3, 1>(q0, d, row_of, n, s0, ld, kk);
                break;
            case 2:
                score_blocks<2, 4>(q0, d, row_of, n, s0, ld, kk);
                score_blocks<2, 1>(q0, d, row_of, n, s0, ld, kk);
                break;
            default:
                score_blocks<1, 8>(q0, d, row_of, n, s0, ld, kk);
                score_blocks<1, 1>(q0, d, row_of, n, s0, ld, kk);
                break;
        }
    }
}

/// decode_scores over gathered rows of one KV head, the rows k[keys[kk]] for kk < n, eight rows per block: a group of
/// four query heads by score_4x4 (each row loaded, and widened or split, once for the four heads), other groups a head
/// at a time (the rows stay in L1 across the group's heads). Each block also requests the K and V rows (v: the head's
/// value rows) of the entries kGatherAheadRows on into L2, for the value pass and the next blocks; n_listed >= n
/// entries from keys on belong to the head, so the requests run on into its next piece. With the requests in place the
/// head-at-a-time kernel, widening each BF16 row once per head, made a reuse layer as much work for the core as for
/// memory (its time with every row in L3 was three quarters of its time cold; 2-vCPU Xeon, bench/README.md).
template <typename Q, typename T>
void decode_scores_gathered(const Q* qs, int group, int d, const T* k, const T* v, const int32_t* keys, int n,
                            int n_listed, float* sc, int ld) {
    const auto row_of = [k, keys, d](int kk) { return k + static_cast<int64_t>(keys[kk]) * d; };
    const int row_bytes = d * static_cast<int>(sizeof(T));
    const auto request_ahead = [&](int kk) {
        const int last = std::min(kk + kLanes, n_listed - kGatherAheadRows);
        for (int j = kk; j < last; ++j) {
            const int64_t row = static_cast<int64_t>(keys[j + kGatherAheadRows]) * d;
            prefetch_bytes<CacheLevel::L2>(k + row, row_bytes);
            prefetch_bytes<CacheLevel::L2>(v + row, row_bytes);
        }
    };
    int kk = 0;
    for (; kk + kLanes <= n; kk += kLanes) {
        request_ahead(kk);
        if constexpr (kScores4x4<Q>) {
            // BF16 queries come only with d % 64 == 0 (run_decode_pieces' dot16).
            if (group == 4 && d % 16 == 0) {
                score_block<4, 4>(qs, d, row_of, kk, sc, ld);
                score_block<4, 4>(qs, d, row_of, kk + 4, sc, ld);
                continue;
            }
        }
        for (int g = 0; g < group; ++g) score_block<1, kLanes>(qs + g * d, d, row_of, kk, sc + g * ld, ld);
    }
    request_ahead(kk);
    for (; kk < n; ++kk)
        for (int g = 0; g < group; ++g) score_block<1, 1>(qs + g * d, d, row_of, kk, sc + g * ld, ld);
}

/// Softmax state of one piece for one query head from its scores s[0 .. n): s <- exp2(s - m) (exp2_from_max; rounded
/// to BF16 values when `round`), zero weights on to the next multiple of 16 for the BF16 packing of whole vector pairs;
/// returns m and the sum.
void piece_softmax(float* s, int n, bool round, float* m_out, float* l_out) {
    *m_out = exp2_from_max(s, s, n, round, l_out);
    std::fill(s + n, s + round_up(n, 2 * kLanes), 0.0f);
}

/// Merges the per-piece states of query head h in piece order into its output row (see decode_pass): the same order
/// whichever thread merges it.
void merge_decode_head(const AttnShape& shape, int h, const std::vector<int>& piece_begin, const float* state_m,
                       const float* state_l, const float* state_o, float* out) {
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int kv_head = h / group, g = h % group;
    float m = kNegInf;
    for (int pi = piece_begin[kv_head]; pi < piece_begin[kv_head + 1]; ++pi)
        m = std::max(m, state_m[static_cast<int64_t>(pi) * group + g]);
    float* orow = out + static_cast<int64_t>(h) * d;
    std::fill(orow, orow + d, 0.0f);
    float l = 0;
    for (int pi = piece_begin[kv_head]; pi < piece_begin[kv_head + 1]; ++pi) {
        const int64_t st = static_cast<int64_t>(pi) * group + g;
        const float a = std::exp2(state_m[st] - m);
        l += state_l[st] * a;
        const float* o = state_o + st * d;
        for (int j = 0; j < d; ++j) orow[j] += o[j] * a;
    }
    const float inv = 1.0f / l;
    for (int j = 0; j < d; ++j) orow[j] *= inv;
}

/// The work of both decode passes over their pieces (each a run of at most kDecodePiece keys of one KV head):
/// score(piece, qs, qs16, head_off, sc, ld) writes the pre-scaled scores of the group's query heads, sc[g * ld + i]
/// (qs16: the same queries as BF16 for BF16 dot products, or null); runs_of(piece, v_head) returns the piece's value
/// rows as runs (piece_runs, gathered_runs). Each piece keeps its own softmax state; the pieces are merged per head in
/// order, so the result does not depend on the thread count. T: the value rows' element type (float, or uint16_t for
/// BF16). The values go through weighted_rows_group (each BF16 row widened once for up to four heads of the group, fp32
/// rows a head at a time), or with BF16 dot products through weighted_rows_bf16_group (the whole group per interleaved
/// pair of rows).
template <typename T, class ScoreFn, class RunsOf>
void run_decode_pieces(const AttnShape& shape, const float* q, const T* v, const std::vector<DecodePiece>& pieces,
                       const std::vector<int>& piece_begin, ScoreFn score, RunsOf runs_of, float* out) {
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_pieces = static_cast<int>(pieces.size());
    const bool bf16_products = shape.products == MatmulPrecision::Bf16;
    const bool dot16 = KASCADE_DECODE_BF16_DOT && std::is_same_v<T, uint16_t> && bf16_products && d % 64 == 0;
    // Uninitialised: every piece writes its whole state (head_dim is a multiple of the vector width); zeroing the
    // output states is a serial pass over a megabyte per call at 32K keys.
    const size_t n_states = static_cast<size_t>(n_pieces) * group;
    const auto state_m = std::make_unique_for_overwrite<float[]>(n_states);
    const auto state_l = std::make_unique_for_overwrite<float[]>(n_states);
    const auto state_o = std::make_unique_for_overwrite<float[]>(n_states * d);
    const int ld = kDecodePiece + 2 * kLanes;
    // Per thread: the prescaled queries and the scores, and their BF16 copies for the dot-product kernels.
    const size_t query_floats = static_cast<size_t>(group) * d, score_floats = static_cast<size_t>(group) * ld;
    const size_t per_thread = query_floats + score_floats;
    const int threads = omp_get_max_threads();
    const auto scratch = std::make_unique_for_overwrite<float[]>(per_thread * threads);
    const auto scratch16 = std::make_unique_for_overwrite<uint16_t[]>(dot16 ? per_thread * threads : 0);
    const float prescale = shape.scale * kLog2e;

    // One piece: its scores, online softmax and values into its own state (so the merge does not depend on which
    // thread ran it). Without queries (q null) score() has the scores already.
    const auto run_piece = [&](int pi, int thread) {
        float* qs = scratch.get() + per_thread * thread;
        float* sc = qs + query_floats;
        const DecodePiece& piece = pieces[pi];
        const int64_t head_off = static_cast<int64_t>(piece.kv_head) * shape.kv_stride * d;
        if (q != nullptr) {
            for (int g = 0; g < group; ++g) {
                const float* qh = q + static_cast<int64_t>(piece.kv_head * group + g) * d;
                for (int p = 0; p < d; ++p) qs[g * d + p] = qh[p] * prescale;
            }
            if (bf16_products) round_to_bf16(qs, group * d);
        }
        float* o = state_o.get() + static_cast<int64_t>(pi) * group * d;
        const auto runs = runs_of(piece, v + head_off);
#if KASCADE_DECODE_BF16_DOT
        if constexpr (std::is_same_v<T, uint16_t>) {
            if (dot16) {
                uint16_t* qs16 = scratch16.get() + per_thread * thread;
                uint16_t* p16 = qs16 + query_floats;
                if (q != nullptr) pack_bf16(qs, group * d, qs16);
                score(piece, qs, qs16, head_off, sc, ld);
                for (int g = 0; g < group; ++g) {
                    const int64_t st = static_cast<int64_t>(pi) * group + g;
                    piece_softmax(sc + g * ld, piece.n_keys, true, &state_m[st], &state_l[st]);
                    pack_bf16(sc + g * ld, round_up(piece.n_keys, 2 * kLanes), p16 + g * ld);
                }
                runs([&](const auto& row_of, int idx, int len) {
                    weighted_rows_bf16_group(row_of, p16 + idx, ld, group, len, d, idx > 0, o);
                });
                return;
            }
        }
#endif
        score(piece, qs, nullptr, head_off, sc, ld);
        for (int g = 0; g < group; ++g) {
            const int64_t st = static_cast<int64_t>(pi) * group + g;
            piece_softmax(sc + g * ld, piece.n_keys, bf16_products, &state_m[st], &state_l[st]);
        }
        runs([&](const auto& row_of, int idx, int len) {
            weighted_rows_group(row_of, sc + idx, ld, group, len, d, idx > 0, o);
        });
    };
    // Pieces are handed out kPiecesPerChunk at a time; with no more than that (a short context) one thread would
    // take them all, and the parallel region would only add its start and barrier to a call of a few microseconds.
    constexpr int kPiecesPerChunk = 4;
    const auto merge = [&](int h) {
        merge_decode_head(shape, h, piece_begin, state_m.get(), state_l.get(), state_o.get(), out);
    };
    if (n_pieces <= kPiecesPerChunk) {
        for (int pi = 0; pi < n_pieces; ++pi) run_piece(pi, 0);
        for (int h = 0; h < shape.n_q_heads; ++h) merge(h);
    } else {
        // The merge is split over the threads too, behind the pieces loop's own barrier. With the states left
        // uninitialised, this took dense decode attention at 32K keys from 25.6-26.8 to 21.2-21.6 ms per token (1B
        // shape, BF16 cache, 16-core Xeon, interleaved A/B runs; bench/README.md).
#pragma omp parallel
        {
            const int thread = omp_get_thread_num();
#pragma omp for schedule(dynamic, kPiecesPerChunk)
            for (int pi = 0; pi < n_pieces; ++pi) run_piece(pi, thread);
#pragma omp for schedule(static) nowait
            for (int h = 0; h < shape.n_q_heads; ++h) merge(h);
        }
    }
}

}  // namespace

/// sc[g * ld + kk] = qs[g] . k[kk] for kk < n, in the micro-kernels of decode_scores_of.
void decode_scores(const float* qs, int group, int d, KvPtr k, int n, float* sc, int ld,
                   [[maybe_unused]] const uint16_t* qs16) {
    k.visit([&](const auto* rows) {
        const auto row_of = [rows, d](int kk) { return rows + static_cast<int64_t>(kk) * d; };
#if KASCADE_DECODE_BF16_DOT
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*rows)>, uint16_t>) {
            if (qs16 != nullptr) return decode_scores_of(qs16, group, d, row_of, n, sc, ld);
        }
#endif
#if KASCADE_DECODE_SCORE_4X4
        // fp32 queries against BF16 rows: split once per call into Bf16Halves' order. The anchor's scoring with its K
        // in L2 (1B shape, 32K keys, 8 sequences on a 2-vCPU Xeon) went from 9.6 to 7.4 ms (bench/README.md).
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*rows)>, uint16_t>) {
            if (with_split_queries(qs, group, d, [&](const SplitQuery* split) {
                    decode_scores_of(split, group, d, row_of, n, sc, ld);
                }))
                return;
        }
#endif
        decode_scores_of(qs, group, d, row_of, n, sc, ld);
    });
}

void check_attn_shape(const AttnShape& s) {
    KASCADE_ASSERT(s.n_q_heads > 0 && s.n_kv_heads > 0 && s.n_q_heads % s.n_kv_heads == 0);
    KASCADE_ASSERT(s.head_dim > 0 && s.head_dim % kLanes == 0);
    KASCADE_ASSERT(s.n_q >= 1 && s.n_q <= s.n_k && s.n_k <= s.kv_stride);
    KASCADE_ASSERT(std::isfinite(s.scale) && s.scale > 0);
    KASCADE_ASSERT(s.window >= 0);
}

void dense_prefill_pass(const AttnShape& shape, const float* q, KvPtr k, const PrefillOutputs& outputs) {
    check_attn_shape(shape);
    KASCADE_ASSERT(q != nullptr && k != nullptr);
    KASCADE_ASSERT((outputs.out == nullptr) == (outputs.v == nullptr));
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_kv = shape.n_kv_heads;
    TileMass* mass = outputs.mass;
    const int tile = outputs.tile;
    int rows = dense_query_rows(group);
    int key_block = kKeyBlock;
    int n_k_tiles = 0;
    if (mass != nullptr) {
        // Query and key blocks made of whole tiles so a block's statistics pool into whole (query, key) tiles.
        KASCADE_ASSERT(tile > 0 && shape.n_q == shape.n_k);
        rows = key_block = tile * std::max(1, kKeyBlock / tile);
        n_k_tiles = tile_count(shape.n_k, tile);
        mass->n_kv_heads = n_kv;
        mass->n_q_tiles = tile_count(shape.n_q, tile);
        mass->n_k_tiles = n_k_tiles;
        mass->tile = tile;
        mass->mass.assign(static_cast<size_t>(n_kv) * mass->n_q_tiles * n_k_tiles, 0.0f);
        mass->window = shape.effective_window();
        mass->n_keys = shape.n_k;
    }
    const int n_blocks = tile_count(shape.n_q, rows);
    const int n_items = n_kv * n_blocks;
    const size_t cap = round_up(group * rows, kPanel);
    const size_t block_floats = query_block_floats(d, group, rows, key_block);
    const size_t mass_floats = mass ? cap * (n_k_tiles + tile_count(shape.n_k, key_block) + 1) : 0;
    const size_t per_thread = block_floats + mass_floats;
    std::vector<float> scratch(per_thread * omp_get_max_threads());
    const float prescale = shape.scale * kLog2e;

#pragma omp parallel
    {
        float* mine = scratch.data() + per_thread * omp_get_thread_num();
        QueryBlock b = query_block_bind(mine, d, group, rows, key_block);
        float* partial = mine + block_floats;
        float* snap = partial + cap * n_k_tiles;
        float* w = snap + cap * tile_count(shape.n_k, key_block);
        // Causal work grows with the block index: hand out the largest blocks first.
#pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < n_items; ++item) {
            const int qb = n_blocks - 1 - item / n_kv;
            const int kv_head = item % n_kv;
            const int row0 = qb * rows;
            const int n_rows = std::min(rows, shape.n_q - row0);
            query_block_load(b, shape, q, kv_head, row0, n_rows, prescale, outputs.v != nullptr);
            const int64_t head_off = static_cast<int64_t>(kv_head) * shape.kv_stride * d;
            const int n_vis = shape.n_k - shape.n_q + row0 + n_rows;  // keys visible to the block's last row
            const int key_begin = window_key_begin(b.min_pos, b.window, key_block);
            for (int key0 = key_begin; key0 < n_vis; key0 += key_block) {
                const int blk = key0 / key_block;
                const int n_keys = std::min(key_block, n_vis - key0);
                query_block_scores(b, k + head_off + static_cast<int64_t>(key0) * d, n_keys, key0);
                query_block_softmax(b, n_keys);
                if (outputs.v != nullptr)
                    query_block_accumulate(b, outputs.v + head_off + static_cast<int64_t>(key0) * d, n_keys);
                if (mass != nullptr) {
                    query_block_tile_sums(b, n_keys, tile, partial + static_cast<int64_t>(key0 / tile) * b.n_pad);
                    std::copy(b.m, b.m + b.n_pad, snap + static_cast<int64_t>(blk) * b.n_pad);
                }
            }
            query_block_store(b, shape, kv_head, row0, outputs.out, outputs.lse);
            if (mass != nullptr)
                pool_block_mass(b, kv_head, row0, key_block, tile, key_begin, n_vis, partial, snap, w, mass);
        }
    }
}

void decode_pass(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, const KeyRange* ranges,
                 const int* range_begin, float* out) {
    check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1);
    KASCADE_ASSERT(q != nullptr && k != nullptr && v != nullptr && out != nullptr);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_kv = shape.n_kv_heads;

    std::vector<DecodePiece> pieces;
    std::vector<int> piece_begin(n_kv + 1, 0);
    for (int h = 0; h < n_kv; ++h) {
        piece_begin[h] = static_cast<int>(pieces.size());
        DecodePiece cur{h, range_begin[h], 0, 0};
        for (int r = range_begin[h]; r < range_begin[h + 1]; ++r) {
            KASCADE_ASSERT(ranges[r].len > 0 && ranges[r].start >= 0 && ranges[r].start + ranges[r].len <= shape.n_k);
            for (int off = 0; off < ranges[r].len;) {
                const int take = std::min(ranges[r].len - off, kDecodePiece - cur.n_keys);
                cur.n_keys += take;
                off += take;
                if (cur.n_keys == kDecodePiece) {
                    pieces.push_back(cur);
                    const bool range_done = off == ranges[r].len;
                    cur = DecodePiece{h, range_done ? r + 1 : r, range_done ? 0 : off, 0};
                }
            }
        }
        if (cur.n_keys > 0) pieces.push_back(cur);
        KASCADE_ASSERT(static_cast<int>(pieces.size()) > piece_begin[h]);  // every head attends to a key
    }
    piece_begin[n_kv] = static_cast<int>(pieces.size());

    const auto score = [&](const DecodePiece& piece, const float* qs, const uint16_t* qs16, int64_t head_off, float* sc,
                           int ld) {
        for_each_part(piece, ranges, [&](int start, int len, int idx) {
            decode_scores(qs, group, d, k + head_off + static_cast<int64_t>(start) * d, len, sc + idx, ld, qs16);
        });
    };
    const auto runs_of = [&](const DecodePiece& piece, const auto* vh) { return piece_runs(piece, ranges, vh, d); };
    v.visit([&](const auto* v_rows) { run_decode_pieces(shape, q, v_rows, pieces, piece_begin, score, runs_of, out); });
}

/// The pieces of a decode over listed keys (decode_pass_gathered, decode_pass_scored): kDecodePiece consecutive list
/// entries of one head each, (head, first entry, entries); piece_begin[h] is head h's first. Every key must lie in
/// first_key .. n_k - 1.
std::vector<DecodePiece> listed_pieces(const AttnShape& shape, const int32_t* keys, const int* key_begin, int first_key,
                                       std::vector<int>* piece_begin) {
    const int n_kv = shape.n_kv_heads;
    std::vector<DecodePiece> pieces;
    piece_begin->assign(n_kv + 1, 0);
    for (int h = 0; h < n_kv; ++h) {
        (*piece_begin)[h] = static_cast<int>(pieces.size());
        KASCADE_ASSERT(key_begin[h + 1] > key_begin[h]);  // every head attends to a key
        bool in_range = true;                             // one check after the loop, so the loop vectorises
        for (int i = key_begin[h]; i < key_begin[h + 1]; ++i) in_range &= keys[i] >= first_key && keys[i] < shape.n_k;
        KASCADE_ASSERT(in_range);
        for (int i = key_begin[h]; i < key_begin[h + 1]; i += kDecodePiece)
            pieces.push_back({h, i, 0, std::min(kDecodePiece, key_begin[h + 1] - i)});
    }
    (*piece_begin)[n_kv] = static_cast<int>(pieces.size());
    return pieces;
}

void decode_pass_gathered(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, const int32_t* keys,
                          const int* key_begin, float* out) {
    check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1);
    KASCADE_ASSERT(q != nullptr && k != nullptr && v != nullptr && out != nullptr && keys != nullptr);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    std::vector<int> piece_begin;
    const std::vector<DecodePiece> pieces = listed_pieces(shape, keys, key_begin, 0, &piece_begin);

    const auto score = [&](const DecodePiece& piece, const float* qs, [[maybe_unused]] const uint16_t* qs16,
                           int64_t head_off, float* sc, int ld) {
        const int32_t* listed = keys + piece.range;
        const int n_listed = key_begin[piece.kv_head + 1] - piece.range;
        (k + head_off).visit([&](const auto* k_rows) {
            using T = std::remove_cvref_t<decltype(*k_rows)>;
            const T* v_rows = nullptr;  // K and V share the cache's dtype (f32() / bf16() check it)
            if constexpr (std::is_same_v<T, float>) {
                v_rows = (v + head_off).f32();
            } else {
                v_rows = (v + head_off).bf16();
            }
#if KASCADE_DECODE_BF16_DOT
            if constexpr (std::is_same_v<T, uint16_t>) {
                if (qs16 != nullptr)
                    return decode_scores_gathered(qs16, group, d, k_rows, v_rows, listed, piece.n_keys, n_listed, sc,
                                                  ld);
            }
#endif
#if KASCADE_DECODE_SCORE_4X4
            if constexpr (std::is_same_v<T, uint16_t>) {
                if (with_split_queries(qs, group, d, [&](const SplitQuery* split) {
                        decode_scores_gathered(split, group, d, k_rows, v_rows, listed, piece.n_keys, n_listed, sc, ld);
                    }))
                    return;
            }
#endif
            decode_scores_gathered(qs, group, d, k_rows, v_rows, listed, piece.n_keys, n_listed, sc, ld);
        });
    };
    const auto runs_of = [&](const DecodePiece& piece, const auto* vh) {
        return gathered_runs(keys + piece.range, piece.n_keys, vh, d);
    };
    v.visit([&](const auto* v_rows) { run_decode_pieces(shape, q, v_rows, pieces, piece_begin, score, runs_of, out); });
}

void decode_pass_scored(const AttnShape& shape, const float* scores, int ld, float to_log2, KvPtr v,
                        const int32_t* keys, const int* key_begin, float* out) {
    check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1);
    KASCADE_ASSERT(scores != nullptr && v != nullptr && out != nullptr && keys != nullptr);
    KASCADE_ASSERT(std::isfinite(to_log2) && to_log2 > 0);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    std::vector<int> piece_begin;
    const std::vector<DecodePiece> pieces = listed_pieces(shape, keys, key_begin, 0, &piece_begin);

    // The piece's scores copied from the list-order rows, and its V rows requested into L2 kGatherAheadRows entries
    // ahead (the value kernel's own requests, a few rows ahead into L1, leave scattered rows waiting on memory).
    const auto score = [&](const DecodePiece& piece, const float*, const uint16_t*, int64_t head_off, float* sc,
                           int sc_ld) {
        const int32_t* listed = keys + piece.range;
        const int n_listed = key_begin[piece.kv_head + 1] - piece.range;
        const int entry = piece.range - key_begin[piece.kv_head];  // the piece's first entry in the head's list
        (v + head_off).visit([&](const auto* v_rows) {
            const int row_bytes = d * static_cast<int>(sizeof(*v_rows));
            const auto request = [&](int first, int end) {
                for (int i = first; i < std::min(end, n_listed); ++i)
                    prefetch_bytes<CacheLevel::L2>(v_rows + static_cast<int64_t>(listed[i]) * d, row_bytes);
            };
            if (entry == 0) request(0, kGatherAheadRows);  // the head's first piece
            for (int g = 0; g < group; ++g) {
                const float* row = scores + (static_cast<int64_t>(piece.kv_head) * group + g) * ld + entry;
                float* out_g = sc + static_cast<int64_t>(g) * sc_ld;
                for (int i = 0; i < piece.n_keys; ++i) out_g[i] = row[i] * to_log2;
            }
            request(kGatherAheadRows, piece.n_keys + kGatherAheadRows);
        });
    };
    const auto runs_of = [&](const DecodePiece& piece, const auto* vh) {
        return gathered_runs(keys + piece.range, piece.n_keys, vh, d);
    };
    v.visit([&](const auto* v_rows) {
        run_decode_pieces(shape, nullptr, v_rows, pieces, piece_begin, score, runs_of, out);
    });
}

}  // namespace detail

void attn_dense_prefill(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out, float* lse) {
    KASCADE_ASSERT(v != nullptr && out != nullptr);
    detail::PrefillOutputs outputs;
    outputs.v = v;
    outputs.out = out;
    outputs.lse = lse;
    detail::dense_prefill_pass(shape, q, k, outputs);
}

void attn_dense_decode(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out) {
    detail::check_attn_shape(shape);
    const int window = shape.effective_window();
    const int key_begin = window > 0 ? shape.n_k - window : 0;
    std::vector<detail::KeyRange> ranges(shape.n_kv_heads, detail::KeyRange{key_begin, shape.n_k - key_begin});
    std::vector<int> range_begin(shape.n_kv_heads + 1);
    for (int h = 0; h <= shape.n_kv_heads; ++h) range_begin[h] = h;
    detail::decode_pass(shape, q, k, v, ranges.data(), range_begin.data(), out);
}

}  // namespace kascade
