// kernels/attention_engine.h: internal building blocks shared by the dense, sparse and pooling kernels (not a public
// API). One work item is a block of query rows of one GQA group against a sequence of key blocks, FlashAttention
// style: scores of one key block at a time, an online softmax (running max and sum, rescaled accumulator), never a
// full score matrix.
//
// All query heads of the group are processed together so each K/V block is loaded once per group. The queries are
// stored transposed as columns c = g * n_rows + i (g: query head within the group, i: row within the block), padded
// to a multiple of kPanel columns; scores are stored key-major, s[key][column], which makes every softmax statistic a
// vertical (lane-wise) operation with no horizontal reductions. Scores are kept in log2 units (the queries are
// pre-scaled by scale * log2(e)) so the softmax uses exp2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/attention_types.h"
#include "kernels/kv_ptr.h"

namespace kascade::detail {

constexpr int kPanel = 16;            ///< query columns per score micro-kernel (two vectors)
constexpr int kPosPadding = 1 << 30;  ///< position given to padding columns (never stored; a window masks them)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();  ///< the score of a masked key

constexpr int round_up(int x, int m) {
    return (x + m - 1) / m * m;
}

/// Views into one thread's scratch for one work item plus the running softmax state of its columns.
struct QueryBlock {
    int head_dim = 0;
    int group = 0;           ///< query heads per KV head
    int n_rows = 0;          ///< query rows in this block
    int n_cols = 0;          ///< group * n_rows real columns
    int n_pad = 0;           ///< n_cols rounded up to kPanel
    int min_pos = 0;         ///< absolute position of the first query row
    int window = 0;          ///< AttnShape::effective_window(): 0 = causal mask only
    int max_keys = 0;        ///< capacity of s in key rows
    float* qt = nullptr;     ///< [head_dim][n_pad] queries, transposed and pre-scaled
    float* s = nullptr;      ///< [max_keys][n_pad] scores of the current key block, then probabilities
    float* m = nullptr;      ///< [n_pad] running max, log2 units
    float* l = nullptr;      ///< [n_pad] running sum of exp2(score - m)
    float* alpha = nullptr;  ///< [n_pad] rescale factor of the last softmax update
    float* o = nullptr;      ///< [n_pad][head_dim] unnormalised output
    int32_t* pos = nullptr;  ///< [n_pad] absolute query position per column (kPosPadding for padding)
    float* kv = nullptr;     ///< [max_keys][head_dim] a block of BF16 key or value rows widened to fp32
};

/// Preconditions every attention kernel checks (aborting on failure): positive sizes, whole GQA groups, head_dim a
/// multiple of 8 (every Llama-family head size is), 1 <= n_q <= n_k <= kv_stride.
void check_attn_shape(const AttnShape& shape);

/// Floats of scratch one QueryBlock needs (pos is stored in float-sized slots).
size_t query_block_floats(int head_dim, int group, int max_rows, int max_keys);

/// Lays a QueryBlock out in `scratch` (query_block_floats() floats) for blocks of up to max_rows rows.
QueryBlock query_block_bind(float* scratch, int head_dim, int group, int max_rows, int max_keys);

/// Starts a work item: query rows row0..row0+n_rows-1 of the group of `kv_head`, multiplied by `prescale`;
/// resets m = -inf, l = 0 and (if with_output) o = 0. Takes the window from shape.
void query_block_load(QueryBlock& b, const AttnShape& shape, const float* q, int kv_head, int row0, int n_rows,
                      float prescale, bool with_output);

/// s = K[key0 .. key0+n_keys) . qt with the causal and window masks (score -inf where the key is after the column's
/// query or at or before query - window). k points at key row key0 of the KV head (BF16 rows are widened into b.kv).
/// With a window a block may hide every key from some column; the softmax below handles such columns.
void query_block_scores(QueryBlock& b, KvPtr k, int n_keys, int key0);

/// Scores of gathered keys: k holds n_keys rows copied from the positions key_pos[0 .. n_keys), all before the block's
/// first query (so no causal mask applies); only the window mask is applied, per key position.
void query_block_scores_gathered(QueryBlock& b, const float* k, int n_keys, const int32_t* key_pos);

/// First key the window (0 = none) can show to query rows starting at position min_pos, rounded down to a multiple
/// of `align`: keys before it are outside the window of every row, so the kernels skip them.
int window_key_begin(int min_pos, int window, int align);

/// Online softmax update with the scores in s: new running max, s <- exp2(s - m), l <- l * alpha + row sums. A column
/// that has seen only masked keys so far keeps m = -inf, l = 0 (its probabilities are 0, not NaN).
void query_block_softmax(QueryBlock& b, int n_keys);

/// s <- exp2(s - m_fixed[c]): exact probabilities when the final log2-sum-exp per column is already known.
void query_block_exp_fixed(QueryBlock& b, int n_keys, const float* m_fixed);

/// o <- o * alpha + p^T V for the probabilities in s; v points at value row key0 of the KV head (BF16 rows are
/// widened into b.kv).
void query_block_accumulate(QueryBlock& b, KvPtr v, int n_keys);

/// Per sub-tile of `tile` key rows of the block: out[t][c] = sum (or max) of s over the rows of sub-tile t.
/// out: [ceil(n_keys / tile)][n_pad].
void query_block_tile_sums(const QueryBlock& b, int n_keys, int tile, float* out);
void query_block_tile_max(const QueryBlock& b, int n_keys, int tile, float* out);

/// Writes out = o / l to the token-major output and, if lse is not null, lse = ln(sum exp(scaled scores)).
void query_block_store(const QueryBlock& b, const AttnShape& shape, int kv_head, int row0, float* out, float* lse);

/// What one dense prefill pass produces (kernels/dense_attention.cpp runs it; tile_mass.cpp reuses it).
struct PrefillOutputs {
    KvPtr v = nullptr;         ///< null: no value work (row statistics and/or mass only)
    float* out = nullptr;      ///< [n_q][n_q_heads][head_dim], needs v
    float* lse = nullptr;      ///< [n_q_heads][n_q] natural-log sum-exp of the scaled scores
    TileMass* mass = nullptr;  ///< post-softmax mass, pooled with tile `tile` (needs n_q == n_k)
    int tile = 0;
};
void dense_prefill_pass(const AttnShape& shape, const float* q, KvPtr k, const PrefillOutputs& outputs);

/// A run of consecutive keys of one KV head (decode: the single query's window is applied by clipping the runs).
struct KeyRange {
    int start = 0;
    int len = 0;
};

/// Decode over arbitrary key ranges: ranges[range_begin[h] .. range_begin[h+1]) are the keys of KV head h, ascending
/// and disjoint. The keys are cut into pieces of a fixed size (independent of the thread count, so results are
/// bitwise reproducible), each piece's partial softmax state is computed in parallel and merged in order.
void decode_pass(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, const KeyRange* ranges,
                 const int* range_begin, float* out);

/// Decode over listed keys: keys[key_begin[h] .. key_begin[h+1]) are the key positions KV head h attends (any
/// order, no repeats, at least one per head). The listed K/V rows are read in place (no copy), in pieces of a fixed
/// number of entries merged in order as in decode_pass.
void decode_pass_gathered(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, const int32_t* keys,
                          const int* key_begin, float* out);

/// decode_pass_gathered with the scores of the listed keys taken from a decode scoring pass instead of their K rows,
/// in list order: the scaled score of query head h * group + g and list entry key_begin[h] + e at
/// scores[(h * group + g) * ld + e], times to_log2 in the log2 units the decode passes prescale to (1 when the pass
/// prescaled so; log2(e) for a pass in natural units). Only the listed V rows are read.
void decode_pass_scored(const AttnShape& shape, const float* scores, int ld, float to_log2, KvPtr v,
                        const int32_t* keys, const int* key_begin, float* out);

/// sc[g * ld + kk] = qs[g] . k[kk] for kk < n and the group's g: the prescaled queries qs [group][d] against n
/// consecutive key rows, register-blocked over query heads and keys and finished by transposing reductions (BF16
/// rows widened as they are loaded, or with AVX-512 split into even and odd values against queries stored in that
/// order: detail::Bf16Halves). qs16, if not null, holds the same queries as BF16 (their values BF16 already):
/// against BF16 rows the products are then BF16 dot products where the CPU has them (kernels/decode_bf16_dot.h).
void decode_scores(const float* qs, int group, int d, KvPtr k, int n, float* sc, int ld,
                   const uint16_t* qs16 = nullptr);

}  // namespace kascade::detail
