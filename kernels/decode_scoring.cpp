// kernels/decode_scoring.cpp: the decode anchor's pooled attention (one pass over K) and the decode top-k.
#include "kernels/decode_scoring.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "base/error.h"
#include "kernels/attention_engine.h"
#include "kernels/attention_simd.h"
#include "kernels/decode_bf16_dot.h"
#include "kernels/decode_softmax.h"
#include "kernels/radix_select.h"
#include "kernels/topk_tiles.h"
#include "kernels/weighted_rows.h"

namespace kascade {
namespace {

using detail::kLanes;
using detail::kNegInf;
using detail::v_add;
using detail::v_fma;
using detail::v_hsum;
using detail::v_load;
using detail::v_max;
using detail::v_set1;
using detail::v_store;
using detail::v_zero;
using detail::vf;

constexpr int kScorePiece = 1024;  ///< keys per work piece (fixed: results do not depend on the thread count)

/// Floats of a piece's softmax state per query head: the running max, the sum of the exact weights (the mass's
/// normaliser) and the sum of the weights the values were taken with (the BF16-rounded ones under BF16 products).
constexpr int kStateFloats = 3;

/// The scores of every key the query sees, laid out in scratch, and the pieces they were computed in.
struct DecodeScores {
    int key_begin = 0;  ///< first key the query sees (the window's start)
    int n_keys = 0;     ///< keys key_begin .. n_k - 1
    int ld = 0;         ///< floats per query head row of scores
    int n_pieces = 0;
    const float* s = nullptr;      ///< [n_kv_heads][group][ld] what pools: exp2(score - piece max) post-softmax, else
                                   ///< the scaled scores
    const float* raw = nullptr;    ///< [n_kv_heads][group][ld] the scaled scores
    const float* state = nullptr;  ///< [n_kv_heads][n_pieces][group][kStateFloats] (post-softmax)
    int slot = -1;  ///< >= 0: every head's rows in this block of s and raw (score_heads' rows_per_thread)

    /// Where KV head h's group of rows starts in s and raw.
    int64_t rows_of(int h, int group) const { return static_cast<int64_t>(slot >= 0 ? slot : h) * group * ld; }

    const float* state_of(int h, int piece, int group, int g) const {
        return state + ((static_cast<int64_t>(h) * n_pieces + piece) * group + g) * kStateFloats;
    }
};

/// Floats of the piece weights score_heads rounds per query head (a multiple of 32: pack_bf16 and the BF16 value
/// kernel's zero after an odd count).
constexpr int kPieceWeights = detail::round_up(kScorePiece, 32);

/// The unnormalised outputs o[g][0 .. d) = sum over j < n of w_g[j] v[j] of one piece for the group's query heads,
/// w_g = s + g * ld its exp2(s - m) weights, as attn_dense_decode takes them: under BF16 products rounded to BF16
/// (into w, and packed into w16 for the BF16 dot-product kernel when dot16), their sum then put in the piece's states
/// (st: [group][kStateFloats]) in place of the exact one.
void piece_values(const float* s, int ld, int group, int n, KvPtr v, int d, bool bf16_products,
                  [[maybe_unused]] bool dot16, float* w, [[maybe_unused]] uint16_t* w16, float* st, float* o) {
    const int n_pad = detail::round_up(n, 32);
    const float* weights = s;
    int w_ld = ld;
    if (bf16_products) {
        for (int g = 0; g < group; ++g) {
            const float* sg = s + static_cast<int64_t>(g) * ld;
            float* wg = w + static_cast<int64_t>(g) * kPieceWeights;
            std::copy(sg, sg + n, wg);
            std::fill(wg + n, wg + n_pad, 0.0f);
            vf sum = v_zero();
            for (int j = 0; j < n_pad; j += kLanes) {
                const vf x = detail::v_round_bf16(v_load(wg + j));
                v_store(wg + j, x);
                sum = v_add(sum, x);
            }
            st[g * kStateFloats + 2] = v_hsum(sum);
        }
        weights = w;
        w_ld = kPieceWeights;
    }
    v.visit([&](const auto* rows) {
        const auto row_of = [rows, d](int kk) { return rows + static_cast<int64_t>(kk) * d; };
#if KASCADE_DECODE_BF16_DOT
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*rows)>, uint16_t>) {
            if (dot16) {
                for (int g = 0; g < group; ++g)
                    detail::pack_bf16(w + static_cast<int64_t>(g) * kPieceWeights, n_pad, w16 + g * kPieceWeights);
                detail::weighted_rows_bf16_group(row_of, w16, kPieceWeights, group, n, d, false, o);
                return;
            }
        }
#endif
        detail::weighted_rows_group(row_of, weights, w_ld, group, n, d, false, o);
    });
}

/// Pass 1: per (KV head, piece) the scaled scores of the group's query heads into scratch->scores (kept there for an
/// anchor's attention over its selection: scratch->scored); for post-softmax also exp2(s - piece max) into
/// scratch->exp_scores and the piece's state, and (v not null) the piece's unnormalised output (piece_values) into
/// scratch->output ([n_kv_heads][n_pieces][group][head_dim]). after_head(r, h) runs once every piece of KV head h is
/// scored, inside the parallel region:
///  - when the threads divide the KV heads evenly, each thread scores whole heads, piece after piece, and runs
///    after_head right after each, while the head's scores (half a megabyte for 4 query heads at 32K keys) are still
///    in its caches: a 32K anchor pass (1B shape, 2-core Zen 5) took 1.43-1.44 ms this way against 1.48-1.54 ms with
///    every head's scores written before any was pooled;
///  - otherwise (more threads than KV heads, or an uneven split) the (head, piece) items go to all threads, and
///    after_head runs over the heads behind the items' barrier.
/// Either way every piece is scored alike and after_head sees the same scores: the results do not depend on it.
/// rows_per_thread (for a pass whose after_head leaves all that later calls read): in the first case each thread
/// writes every head's rows into one block of them (its thread number's), reused while in its caches, and
/// scratch->scored says no complete set of rows is kept.
template <typename AfterHead>
void score_heads(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, bool post_softmax, bool rows_per_thread,
                 DecodeScoringScratch* scratch, AfterHead after_head) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1 && q != nullptr && k != nullptr && scratch != nullptr);
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_kv = shape.n_kv_heads;
    DecodeScores r;
    r.key_begin = decode_first_key(shape.n_k, shape.effective_window());
    r.n_keys = shape.n_k - r.key_begin;
    r.ld = detail::round_up(r.n_keys, kLanes);
    r.n_pieces = tile_count(r.n_keys, kScorePiece);
    const size_t score_floats = static_cast<size_t>(n_kv) * group * r.ld;
    const size_t n_states = static_cast<size_t>(n_kv) * r.n_pieces * group;
    // Each thread's prescaled queries and rounded piece weights sit after the scores.
    const size_t query_floats = static_cast<size_t>(group) * d;
    const size_t per_thread = query_floats + static_cast<size_t>(group) * kPieceWeights;
    // BF16 products (kernels/decode_bf16_dot.h): the queries and the weights rounded to BF16, and packed for the
    // dot-product kernels.
    const bool bf16_products = shape.products == MatmulPrecision::Bf16;
    const bool dot16 = KASCADE_DECODE_BF16_DOT && bf16_products && k.dtype() == KvDType::BF16 && d % 64 == 0;
    const int threads = omp_get_max_threads();
    if (scratch->scores.size() < score_floats + per_thread * threads)
        scratch->scores.resize(score_floats + per_thread * threads);
    if (dot16 && scratch->queries.size() < per_thread * threads) scratch->queries.resize(per_thread * threads);
    if (scratch->state.size() < n_states * kStateFloats) scratch->state.resize(n_states * kStateFloats);
    if (post_softmax && scratch->exp_scores.size() < score_floats) scratch->exp_scores.resize(score_floats);
    if (v != nullptr && scratch->output.size() < n_states * d) scratch->output.resize(n_states * d);
    float* scores = scratch->scores.data();
    float* state = scratch->state.data();
    float* output = scratch->output.data();
    float* exp_scores = scratch->exp_scores.data();
    r.s = post_softmax ? exp_scores : scores;
    r.raw = scores;
    r.state = state;
    scratch->scored = DecodeScoreLayout{shape.n_k, r.key_begin, r.ld, post_softmax};
    scratch->listed_ld = 0;  // a pass that gathers its lists sets it after this one
    // Post-softmax works in log2 units (exp2); pre-softmax keeps the scaled score itself.
    const float prescale = post_softmax ? shape.scale * detail::kLog2e : shape.scale;
    const int n_pieces = r.n_pieces;
    const int ld = r.ld;
    const int key_begin = r.key_begin;
    const int n_keys = r.n_keys;

    // One thread's buffers, and the KV head whose queries they hold.
    struct ThreadScratch {
        float* qs;
        float* w;
        uint16_t* qs16;
        uint16_t* w16;
        int loaded_head = -1;
    };
    const auto thread_scratch = [&](int thread) {
        float* qs = scores + score_floats + per_thread * thread;
        uint16_t* qs16 = dot16 ? scratch->queries.data() + per_thread * thread : nullptr;
        return ThreadScratch{qs, qs + query_floats, qs16, dot16 ? qs16 + query_floats : nullptr};
    };
    const auto score_piece = [&](int h, int piece, ThreadScratch& t, const DecodeScores& rows_at) {
        if (h != t.loaded_head) {
            for (int g = 0; g < group; ++g) {
                const float* qh = q + static_cast<int64_t>(h * group + g) * d;
                for (int p = 0; p < d; ++p) t.qs[g * d + p] = qh[p] * prescale;
            }
            if (bf16_products) detail::round_to_bf16(t.qs, group * d);
#if KASCADE_DECODE_BF16_DOT
            if (dot16) detail::pack_bf16(t.qs, group * d, t.qs16);
#endif
            t.loaded_head = h;
        }
        const int off = piece * kScorePiece;
        const int n = std::min(kScorePiece, n_keys - off);
        const int64_t rows = rows_at.rows_of(h, group);
        float* sh = scores + rows;
        const int64_t first_row = (static_cast<int64_t>(h) * shape.kv_stride + key_begin + off) * d;
        detail::decode_scores(t.qs, group, d, k + first_row, n, sh + off, ld, t.qs16);
        if (!post_softmax) return;
        const int64_t at = (static_cast<int64_t>(h) * n_pieces + piece) * group;
        float* eh = exp_scores + rows;
        for (int g = 0; g < group; ++g) {
            float* st = state + (at + g) * kStateFloats;
            st[0] = detail::exp2_from_max(sh + static_cast<int64_t>(g) * ld + off,
                                          eh + static_cast<int64_t>(g) * ld + off, n, false, &st[1]);
            st[2] = st[1];
        }
        if (v != nullptr)
            piece_values(eh + off, ld, group, n, v + first_row, d, bf16_products, dot16, t.w, t.w16,
                         state + at * kStateFloats, output + at * d);
    };

    if (n_kv % threads == 0) {
        // With rows_per_thread each thread writes every head's rows over its previous head's, still in its caches:
        // an anchor at 32K keys no longer writes a fresh half megabyte of scores, and one of exp2 weights, per KV
        // head back to memory.
        scratch->scored.rows_kept = !rows_per_thread;
#pragma omp parallel for schedule(static)
        for (int h = 0; h < n_kv; ++h) {
            const int thread = omp_get_thread_num();
            ThreadScratch t = thread_scratch(thread);
            DecodeScores rt = r;
            if (rows_per_thread) rt.slot = thread;
            for (int piece = 0; piece < n_pieces; ++piece) score_piece(h, piece, t, rt);
            after_head(rt, h);
        }
        return;
    }
    const int n_items = n_kv * n_pieces;
#pragma omp parallel
    {
        ThreadScratch t = thread_scratch(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < n_items; ++item) score_piece(item / n_pieces, item % n_pieces, t, r);
#pragma omp for schedule(static)
        for (int h = 0; h < n_kv; ++h) after_head(r, h);
    }
}

/// The dense output of KV head h's query heads from pass 1's per-piece states: per query head the pieces merged in
/// order (as decode_pass does), normalised by the sum of the weights the values were taken with.
void merge_head_output(const AttnShape& shape, const DecodeScores& r, const DecodeScoringScratch& scratch, int h,
                       float* out) {
    const int group = shape.group_size();
    const int d = shape.head_dim;
    for (int g = 0; g < group; ++g) {
        float m = kNegInf;
        for (int p = 0; p < r.n_pieces; ++p) m = std::max(m, r.state_of(h, p, group, g)[0]);
        float* orow = out + static_cast<int64_t>(h * group + g) * d;
        std::fill(orow, orow + d, 0.0f);
        float l = 0;
        for (int p = 0; p < r.n_pieces; ++p) {
            const float* st = r.state_of(h, p, group, g);
            const float a = std::exp2(st[0] - m);
            l += st[2] * a;
            const float* o = scratch.output.data() + ((static_cast<int64_t>(h) * r.n_pieces + p) * group + g) * d;
            for (int j = 0; j < d; ++j) orow[j] += o[j] * a;
        }
        const float inv = 1.0f / l;
        for (int j = 0; j < d; ++j) orow[j] *= inv;
    }
}

/// Pass 2 for KV head h: per candidate key j in [first, end), calls emit(j, value) in ascending order with the
/// pooled value (sum over the group of the exact probabilities, or max of the scaled scores). w: [n_pieces][group].
template <typename Emit>
void pool_head(const DecodeScores& r, int h, int group, bool post_softmax, int first, int end, float* w, Emit&& emit) {
    const float* sh = r.s + r.rows_of(h, group);
    if (post_softmax) {
        // Each piece's exp2(s - m_piece) times exp2(m_piece - M) / L is the exact probability.
        for (int g = 0; g < group; ++g) {
            float m = kNegInf;
            for (int p = 0; p < r.n_pieces; ++p) m = std::max(m, r.state_of(h, p, group, g)[0]);
            float l = 0;
            for (int p = 0; p < r.n_pieces; ++p) {
                const float* st = r.state_of(h, p, group, g);
                l += st[1] * std::exp2(st[0] - m);
            }
            for (int p = 0; p < r.n_pieces; ++p) w[p * group + g] = std::exp2(r.state_of(h, p, group, g)[0] - m) / l;
        }
    }
    for (int j0 = first; j0 < end;) {
        const int piece = (j0 - r.key_begin) / kScorePiece;
        const int j1 = std::min(end, r.key_begin + (piece + 1) * kScorePiece);
        int j = j0;
        // Eight keys at a time, then the rest one by one.
        for (; j + kLanes <= j1; j += kLanes) {
            const int x = j - r.key_begin;
            vf acc = post_softmax ? v_zero() : v_set1(kNegInf);
            for (int g = 0; g < group; ++g) {
                const vf s = v_load(sh + static_cast<int64_t>(g) * r.ld + x);
                acc = post_softmax ? v_fma(s, v_set1(w[piece * group + g]), acc) : v_max(acc, s);
            }
            alignas(32) float lanes[kLanes];
            v_store(lanes, acc);
            for (int e = 0; e < kLanes; ++e) emit(j + e, lanes[e]);
        }
        for (; j < j1; ++j) {
            const int x = j - r.key_begin;
            float acc = post_softmax ? 0.0f : kNegInf;
            for (int g = 0; g < group; ++g) {
                const float s = sh[static_cast<int64_t>(g) * r.ld + x];
                acc = post_softmax ? std::fma(s, w[piece * group + g], acc) : std::max(acc, s);
            }
            emit(j, acc);
        }
        j0 = j1;
    }
}

/// Floats of pool_head's weights per thread: [n_pieces][group] of a decode call of this shape.
size_t weight_floats(const AttnShape& shape) {
    const int n_keys = shape.n_k - decode_first_key(shape.n_k, shape.effective_window());
    return static_cast<size_t>(tile_count(n_keys, kScorePiece)) * shape.group_size();
}

}  // namespace

int decode_token_budget(const TopKRule& rule, int tile, int n_k, int window) {
    KASCADE_ASSERT(tile > 0 && n_k > 0);
    const int q_tile = (n_k - 1) / tile;
    const int candidates = std::max(0, q_tile * tile - decode_first_key(n_k, window));
    return std::min(topk_token_budget(rule, q_tile, tile, n_k, window), candidates);
}

int decode_tile_budget(const TopKRule& rule, int tile, int n_k, int window) {
    KASCADE_ASSERT(tile > 0 && n_k > 0);
    const int q_tile = (n_k - 1) / tile;
    const int candidates = std::max(0, q_tile - decode_first_key(n_k, window) / tile);
    return std::min(topk_tile_budget(rule, q_tile, tile, n_k, window), candidates);
}

namespace {

/// Sizes a decode selection (a TokenSelection's keys or a TileSelection's tiles: `entries`) for `budget` entries per
/// head and the scratch for n_cand candidates per head; returns the floats of scratch per head.
template <class Selection>
size_t prepare_decode_selection(int n_kv_heads, int tile, int budget, int n_cand, DecodeScoringScratch* scratch,
                                Selection* selection, std::vector<int32_t> Selection::*entries) {
    selection->n_kv_heads = n_kv_heads;
    selection->n_q_tiles = 1;
    selection->tile = tile;
    selection->max_k = std::max(1, budget);
    selection->count.resize(n_kv_heads);
    (selection->*entries).resize(static_cast<size_t>(n_kv_heads) * selection->max_k);
    const size_t per_head = 2 * static_cast<size_t>(std::max(1, n_cand));
    if (scratch->values.size() < per_head * n_kv_heads) scratch->values.resize(per_head * n_kv_heads);
    return per_head;
}

/// The top-k of head h's decode mass row (candidates first .. first + n_cand - 1) into the selection.
void select_head_tokens(const float* row, int h, int first, int n_cand, int budget, size_t per_head,
                        DecodeScoringScratch* scratch, TokenSelection* selection) {
    selection->count[h] = select_largest(row + first, n_cand, budget, first, scratch->values.data() + per_head * h,
                                         selection->list(h, 0));
}

/// The scores of KV head h's attention list into `listed` (row (h, g) at (h * group + g) * listed_ld): its `count`
/// selected keys, then the keys own_first .. n_k - 1 of the query's own tile, from the score rows the pass left.
void gather_listed_scores(const AttnShape& shape, const DecodeScores& r, int h, const int32_t* selected, int count,
                          int own_first, int listed_ld, float* listed) {
    const int group = shape.group_size();
    for (int g = 0; g < group; ++g) {
        const float* row = r.raw + r.rows_of(h, group) + static_cast<int64_t>(g) * r.ld - r.key_begin;
        float* out = listed + (static_cast<int64_t>(h) * group + g) * listed_ld;
        for (int i = 0; i < count; ++i) out[i] = row[selected[i]];
        std::copy(row + own_first, row + shape.n_k, out + count);
    }
}

/// Pass 1 (score_heads), then per KV head the dense output if v is given, the pooling and, if rule is given, the
/// head's top-k (and without v, the scores of its attention list: gather_listed_scores).
void token_mass_pass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out, Pooling pooling,
                     DecodeScoringScratch* scratch, TokenMass* mass, const TopKRule* rule, TokenSelection* selection) {
    KASCADE_ASSERT(tile > 0 && mass != nullptr && (rule == nullptr) == (selection == nullptr));
    const bool post = pooling == Pooling::PostSoftmax;
    const int group = shape.group_size();
    mass->n_kv_heads = shape.n_kv_heads;
    mass->n_q_tiles = 1;
    mass->n_keys = shape.n_k;
    mass->tile = tile;
    mass->window = shape.effective_window();
    mass->mass.resize(static_cast<size_t>(shape.n_kv_heads) * shape.n_k);
    const int end = (shape.n_k - 1) / tile * tile;  // candidates end before the query's tile
    const int first = std::min(decode_first_key(shape.n_k, mass->window), end);
    const int budget = rule != nullptr ? decode_token_budget(*rule, tile, shape.n_k, mass->window) : 0;
    const size_t per_head = rule != nullptr ? prepare_decode_selection(shape.n_kv_heads, tile, budget, end - first,
                                                                       scratch, selection, &TokenSelection::keys)
                                            : 0;
    const size_t weights_floats = weight_floats(shape) * omp_get_max_threads();
    if (scratch->pool_weights.size() < weights_floats) scratch->pool_weights.resize(weights_floats);
    float* const weights = scratch->pool_weights.data();
    // An anchor (a rule, no V) attends its selection next, from these scores: each head's list gathered below.
    const bool gather_lists = rule != nullptr && v == nullptr;
    const int own_first = std::max(end, decode_first_key(shape.n_k, mass->window));
    const int listed_ld = detail::round_up(std::max(1, budget) + shape.n_k - own_first, kLanes);
    if (gather_lists) {
        const size_t listed_floats = static_cast<size_t>(shape.n_q_heads) * listed_ld;
        if (scratch->listed_scores.size() < listed_floats) scratch->listed_scores.resize(listed_floats);
    }
    // With a rule the selection is made here, and what its attention reads is gathered here too: no later call reads
    // the rows, so each thread reuses one block of them (score_heads' rows_per_thread).
    score_heads(shape, q, k, v, post, rule != nullptr, scratch, [&](const DecodeScores& r, int h) {
        if (v != nullptr) merge_head_output(shape, r, *scratch, h, out);
        float* row = mass->row(h, 0);
        std::fill(row, row + first, 0.0f);
        std::fill(row + end, row + shape.n_k, 0.0f);
        float* w = weights + weight_floats(shape) * omp_get_thread_num();
        pool_head(r, h, group, post, first, end, w, [row](int j, float x) { row[j] = x; });
        if (rule != nullptr) select_head_tokens(row, h, first, end - first, budget, per_head, scratch, selection);
        if (gather_lists)
            gather_listed_scores(shape, r, h, selection->list(h, 0), selection->count[h], own_first, listed_ld,
                                 scratch->listed_scores.data());
    });
    if (gather_lists) {
        scratch->listed_ld = listed_ld;
        scratch->listed_count = selection->count;
    }
}

void tile_mass_pass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out, Pooling pooling,
                    DecodeScoringScratch* scratch, TileMass* mass) {
    KASCADE_ASSERT(tile > 0 && mass != nullptr);
    const bool post = pooling == Pooling::PostSoftmax;
    const int group = shape.group_size();
    const int q_tile = (shape.n_k - 1) / tile;
    mass->n_kv_heads = shape.n_kv_heads;
    mass->n_q_tiles = 1;
    mass->n_k_tiles = q_tile + 1;
    mass->tile = tile;
    mass->window = shape.effective_window();
    mass->n_keys = shape.n_k;
    mass->mass.resize(static_cast<size_t>(shape.n_kv_heads) * mass->n_k_tiles);
    const int end = q_tile * tile;
    const int first = std::min(decode_first_key(shape.n_k, mass->window), end);
    const size_t weights_floats = weight_floats(shape) * omp_get_max_threads();
    if (scratch->pool_weights.size() < weights_floats) scratch->pool_weights.resize(weights_floats);
    float* const weights = scratch->pool_weights.data();
    score_heads(shape, q, k, v, post, false, scratch, [&](const DecodeScores& r, int h) {
        if (v != nullptr) merge_head_output(shape, r, *scratch, h, out);
        float* row = mass->row(h, 0);
        std::fill(row, row + mass->n_k_tiles, post ? 0.0f : kNegInf);
        float* w = weights + weight_floats(shape) * omp_get_thread_num();
        if (post) {
            // Sum per tile in double, as the prefill pooling does, so a tile's mass does not depend on the piece cut.
            double acc = 0;
            int current = first / tile;
            pool_head(r, h, group, true, first, end, w, [&](int j, float x) {
                if (j / tile != current) {
                    row[current] = static_cast<float>(acc);
                    acc = 0;
                    current = j / tile;
                }
                acc += x;
            });
            if (first < end) row[current] = static_cast<float>(acc);
        } else {
            pool_head(r, h, group, false, first, end, w,
                      [row, tile](int j, float x) { row[j / tile] = std::max(row[j / tile], x); });
        }
        // Non-candidate tiles are 0, as in the prefill masses.
        for (int t = 0; t < mass->n_k_tiles; ++t)
            if (t < first / tile || t >= q_tile || first >= end) row[t] = 0.0f;
    });
}

}  // namespace

void decode_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, Pooling pooling,
                       DecodeScoringScratch* scratch, TokenMass* mass, const TopKRule* rule,
                       TokenSelection* selection) {
    token_mass_pass(shape, tile, q, k, nullptr, nullptr, pooling, scratch, mass, rule, selection);
}

void decode_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, Pooling pooling,
                      DecodeScoringScratch* scratch, TileMass* mass) {
    tile_mass_pass(shape, tile, q, k, nullptr, nullptr, pooling, scratch, mass);
}

void attn_dense_decode_with_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                       DecodeScoringScratch* scratch, TokenMass* mass, const TopKRule* rule,
                                       TokenSelection* selection) {
    KASCADE_ASSERT(v != nullptr && out != nullptr);
    token_mass_pass(shape, tile, q, k, v, out, Pooling::PostSoftmax, scratch, mass, rule, selection);
}

void attn_dense_decode_with_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                      DecodeScoringScratch* scratch, TileMass* mass) {
    KASCADE_ASSERT(v != nullptr && out != nullptr);
    tile_mass_pass(shape, tile, q, k, v, out, Pooling::PostSoftmax, scratch, mass);
}

void select_decode_tokens(const TokenMass& mass, const TopKRule& rule, DecodeScoringScratch* scratch,
                          TokenSelection* selection) {
    KASCADE_ASSERT(mass.n_q_tiles == 1 && mass.n_keys > 0 && mass.tile > 0 && scratch != nullptr);
    KASCADE_ASSERT(mass.mass.size() >= static_cast<size_t>(mass.n_kv_heads) * mass.n_keys);
    const int budget = decode_token_budget(rule, mass.tile, mass.n_keys, mass.window);
    const int first = decode_first_key(mass.n_keys, mass.window);
    const int n_cand = std::max(0, (mass.n_keys - 1) / mass.tile * mass.tile - first);
    const size_t per_head =
        prepare_decode_selection(mass.n_kv_heads, mass.tile, budget, n_cand, scratch, selection, &TokenSelection::keys);
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < mass.n_kv_heads; ++h)
        select_head_tokens(mass.row(h, 0), h, first, n_cand, budget, per_head, scratch, selection);
}

void select_decode_tiles(const TileMass& mass, const TopKRule& rule, DecodeScoringScratch* scratch,
                         TileSelection* selection) {
    KASCADE_ASSERT(mass.n_q_tiles == 1 && mass.n_keys > 0 && mass.tile > 0 && scratch != nullptr);
    const int q_tile = (mass.n_keys - 1) / mass.tile;
    KASCADE_ASSERT(mass.n_k_tiles > q_tile &&
                   mass.mass.size() >= static_cast<size_t>(mass.n_kv_heads) * mass.n_k_tiles);
    const int budget = decode_tile_budget(rule, mass.tile, mass.n_keys, mass.window);
    const int first = decode_first_key(mass.n_keys, mass.window) / mass.tile;
    const int n_cand = std::max(0, q_tile - first);
    const size_t per_head =
        prepare_decode_selection(mass.n_kv_heads, mass.tile, budget, n_cand, scratch, selection, &TileSelection::tiles);
    for (int h = 0; h < mass.n_kv_heads; ++h) {
        selection->count[h] = select_largest(mass.row(h, 0) + first, n_cand, budget, first,
                                             scratch->values.data() + per_head * h, selection->list(h, 0));
    }
}

}  // namespace kascade
