// kernels/decode_scoring.h: what a decode step ranks keys by (the Kascade anchor's pooled attention of the new token),
// the decode budgets and the decode top-k.
//
// A decode call has one query row per head at position p = n_k - 1 (AttnShape::n_q == 1); its query tile is
// q_tile = p / tile. As in prefill, the keys of that (possibly partial) tile are always attended and the top-k is
// chosen among the *decode candidates*: the keys strictly before the tile that lie inside the query's window,
// decode_first_key(n_k, window) .. q_tile * tile - 1 (at tile granularity the key tiles holding such a key). The budget
// is the one the last row of a prefill of n_k tokens gets (topk_token_budget / topk_tile_budget of q_tile), capped by
// these candidates (the cap only bites with a window, whose single query sees fewer keys than its tile's first row).
//
// Decode masses and selections reuse the prefill containers with a single query tile: TokenMass / TileMass with
// n_q_tiles == 1 (row(h, 0) is the query's row) and TokenSelection / TileSelection with n_q_tiles == 1 (list(h, 0)).
#pragma once

#include <cstdint>
#include <vector>

#include "base/cache_aligned.h"
#include "kernels/attention_types.h"

namespace kascade {

/// First key inside the window of the decode query at position n_k - 1 (window as AttnShape::effective_window(),
/// 0 = none).
inline int decode_first_key(int n_k, int window) {
    return window > 0 && n_k > window ? n_k - window : 0;
}

/// Keys the decode query of an n_k-key cache keeps: topk_token_budget() of its query tile, capped by its candidates.
int decode_token_budget(const TopKRule& rule, int tile, int n_k, int window = 0);

/// Key tiles it keeps: topk_tile_budget() of its query tile, capped by the candidate key tiles
/// (decode_first_key / tile .. q_tile - 1).
int decode_tile_budget(const TopKRule& rule, int tile, int n_k, int window = 0);

/// Where a decode scoring pass (decode_token_mass, decode_tile_mass and the dense + mass passes) left its scores in
/// DecodeScoringScratch::scores: row (h, g) holds query head h * group + g's scaled scores of keys key_begin ..
/// n_k - 1. An anchor's attention over a selection made apart from the pass reads them back instead of the selected K
/// rows (attn_token_sparse_decode_scored, attn_sparse_decode_scored); one over the selection its own pass made reads
/// the pass's listed_scores instead.
struct DecodeScoreLayout {
    int n_k = 0;        ///< the pass's n_k (0: no pass has run)
    int key_begin = 0;  ///< the first key scored (the window's start): entry 0 of each row
    int ld = 0;         ///< floats per row
    bool log2 = false;  ///< post-softmax passes scale by scale * log2(e) (the decode kernels' exp2 units), pre-softmax
                        ///< ones by scale
    bool rows_kept = true;  ///< every head's rows are in `scores`; false after a pass given a rule, which reuses one
                            ///< block of rows per thread (what its selection's attention reads is in listed_scores)
};

/// Buffers the decode scoring and selection reuse from step to step (so a decode step allocates nothing once they
/// have grown to the longest context).
struct DecodeScoringScratch {
    /// [n_kv_heads][group][padded keys] scaled scores (laid out as `scored` says); after them each thread's prescaled
    /// queries and rounded piece weights
    CacheAlignedVector<float> scores;
    DecodeScoreLayout scored;                ///< what `scores` holds
    CacheAlignedVector<float> exp_scores;    ///< post-softmax: exp2(score - piece max), laid out as `scores`
    CacheAlignedVector<float> state;         ///< per (KV head, key piece, query head): running max and sums
    CacheAlignedVector<float> output;        ///< dense output per (KV head, key piece, query head) before the merge
    CacheAlignedVector<uint32_t> values;     ///< top-k: candidate rank keys per KV head
    CacheAlignedVector<float> pool_weights;  ///< each thread's per-piece softmax weights of the pooling
    CacheAlignedVector<uint16_t> queries;    ///< BF16 products: each thread's prescaled queries and weights as BF16
    /// decode_token_mass given a rule (an anchor's pass) gathers, per KV head right after its top-k while the head's
    /// score rows are still in cache, the scores of the list its attention reads (the selected keys, then the keys of
    /// the query's own tile, in that order): [n_kv_heads][group][listed_ld]. Read back from the rows after every head
    /// was scored, the scattered scores cost the anchor's attention about as much memory traffic as its V rows.
    CacheAlignedVector<float> listed_scores;
    int listed_ld = 0;                  ///< floats per (KV head, query head) row of listed_scores; 0: not gathered
    std::vector<int32_t> listed_count;  ///< the selection's count per KV head the lists were gathered for
};

/// The anchor signal of one decode query, per (KV head, candidate key): with Pooling::PostSoftmax the post-softmax
/// probability of the key (softmax over every key the query sees: causal, inside its window) summed over the group's
/// query heads; with Pooling::PreSoftmax the max over those heads of the scaled raw score. mass->row(h, 0)[j] for the
/// candidates j, 0 for every other key. One pass over K (scores kept in scratch), key pieces in parallel.
/// q: [n_q_heads][head_dim]; k: [n_kv_heads][kv_stride][head_dim]; shape.n_q must be 1.
/// With a rule and a selection it also makes each KV head's top-k (the selection select_decode_tokens makes of the
/// mass) right after pooling the head: one parallel region fewer, where a decode step is short and every region costs
/// a barrier. Then it also gathers the scores attn_token_sparse_decode_scored reads for that selection
/// (DecodeScoringScratch::listed_scores) and keeps no other rows (DecodeScoreLayout::rows_kept).
void decode_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, Pooling pooling,
                       DecodeScoringScratch* scratch, TokenMass* mass, const TopKRule* rule = nullptr,
                       TokenSelection* selection = nullptr);

/// The same pooled per key tile: the sum (post-softmax) or max (pre-softmax) over the tile's keys inside the query's
/// window, for the candidate key tiles; 0 for the others.
void decode_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, Pooling pooling,
                      DecodeScoringScratch* scratch, TileMass* mass);

/// Dense decode (as attn_dense_decode: out [n_q_heads][head_dim]) and the post-softmax decode mass of
/// decode_token_mass in one pass over K and V, for a dense layer whose selection reuse layers read: the scores and
/// probabilities are computed once for both. Under BF16 products the output takes BF16-rounded weights, as
/// attn_dense_decode does (per piece of its own length, so the two agree to the weights' rounding), the mass the exact
/// ones. A rule and a selection add each head's top-k, as in decode_token_mass; the layer's output is made here, so
/// nothing is gathered for a later attention and no rows are kept.
void attn_dense_decode_with_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                       DecodeScoringScratch* scratch, TokenMass* mass, const TopKRule* rule = nullptr,
                                       TokenSelection* selection = nullptr);
/// The same with the per-tile mass of decode_tile_mass.
void attn_dense_decode_with_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                      DecodeScoringScratch* scratch, TileMass* mass);

/// Per KV head the decode_token_budget() highest-scoring candidate keys of a decode mass (mass.n_q_tiles == 1, its
/// n_keys the cache length), ascending; ties to the lower key index, NaN ranked lowest (as select_topk_tokens).
void select_decode_tokens(const TokenMass& mass, const TopKRule& rule, DecodeScoringScratch* scratch,
                          TokenSelection* selection);

/// Per KV head the decode_tile_budget() highest-scoring candidate key tiles, ascending, same order rules.
void select_decode_tiles(const TileMass& mass, const TopKRule& rule, DecodeScoringScratch* scratch,
                         TileSelection* selection);

}  // namespace kascade
