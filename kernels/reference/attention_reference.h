// kernels/reference/attention_reference.h: slow, obviously-correct double-precision twins of the attention kernels,
// used only by the tests. Scores are materialised, softmax is computed in double over exactly the allowed keys, and
// selections are made by a full sort. Layouts and tile conventions: kernels/attention_types.h.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/attention_types.h"
#include "kernels/tile_similarity.h"

namespace kascade::reference {

/// Whether query head h, query row i may attend to key j (on top of nothing: the predicate is the whole mask).
using KeyPredicate = std::function<bool(int h, int i, int j)>;

/// Masked attention in double: out [n_q][n_q_heads][head_dim]; lse (if not null) [n_q_heads][n_q] natural log.
std::vector<double> masked_attention(const AttnShape& shape, const float* q, const float* k, const float* v,
                                     const KeyPredicate& allowed, std::vector<double>* lse = nullptr);

/// Causal attention: row i (position p = n_k - n_q + i) sees keys 0..p, and with shape.window = w only p - w < j.
std::vector<double> dense_attention(const AttnShape& shape, const float* q, const float* k, const float* v,
                                    std::vector<double>* lse = nullptr);

/// Sparse prefill: the selected tiles of the row's (mapped KV head, query tile) plus the causal diagonal tile, only
/// the keys inside the row's window.
std::vector<double> sparse_prefill(const AttnShape& shape, int tile, const float* q, const float* k, const float* v,
                                   const TileSelection& selection, const int32_t* head_map);

/// Token-level sparse prefill: the selected keys of the row's (mapped KV head, query tile) plus the causal diagonal
/// tile, only the keys inside the row's window.
std::vector<double> token_sparse_prefill(const AttnShape& shape, int tile, const float* q, const float* k,
                                         const float* v, const TokenSelection& selection, const int32_t* head_map);

/// Sparse decode: the listed tiles per (mapped) KV head plus the query's own tile, inside the query's window.
std::vector<double> sparse_decode(const AttnShape& shape, int tile, const float* q, const float* k, const float* v,
                                  const int32_t* tiles, const int32_t* count, int max_k, const int32_t* head_map);

/// Token-level sparse decode: per (mapped) KV head the listed keys plus the query's own tile, inside its window.
std::vector<double> token_sparse_decode(const AttnShape& shape, int tile, const float* q, const float* k,
                                        const float* v, const int32_t* keys, const int32_t* count, int max_k,
                                        const int32_t* head_map);

/// Keys before the decode query's tile (query at position n_k - 1) inside its window, by trying every key.
std::vector<int> decode_candidate_keys(int n_k, int tile, int window);
/// Key tiles before the decode query's tile holding a key inside its window, by trying every key.
std::vector<int> decode_candidate_tiles(int n_k, int tile, int window);

/// Decode budgets from the rule's definition (the last row of a prefill of n_k keys), capped by the decode candidates.
int decode_token_budget(const TopKRule& rule, int tile, int n_k, int window = 0);
int decode_tile_budget(const TopKRule& rule, int tile, int n_k, int window = 0);

/// Decode anchor signal per (KV head, key) [n_kv_heads][n_k] (n_q == 1): post-softmax probability summed over the
/// group's query heads, or (pre_softmax) the max scaled score; candidate keys only, 0 elsewhere.
std::vector<double> decode_token_mass(const AttnShape& shape, int tile, const float* q, const float* k,
                                      bool pre_softmax);
/// The same per candidate key tile [n_kv_heads][q_tile + 1]: sum (post) or max (pre) over the tile's keys in the
/// window.
std::vector<double> decode_tile_mass(const AttnShape& shape, int tile, const float* q, const float* k,
                                     bool pre_softmax);

/// The `budget` best of `candidates` by a full stable sort on row (descending, index ascending), ascending.
std::vector<int32_t> top_by_sort(const float* row, std::vector<int> candidates, int budget);

/// Quest page bounds of one KV head found by scanning every key: [n_pages][head_dim] element-wise min (or max) of
/// keys x*page .. min((x+1)*page, n_k) - 1.
std::vector<float> page_min(const AttnShape& shape, const float* k, int kv_head, int page);
std::vector<float> page_max(const AttnShape& shape, const float* k, int kv_head, int page);

/// Quest page scores [n_kv_heads][n_pages] of a decode query in double: for the candidate pages (decode candidate
/// tiles at tile = page) the sum over the group's query heads and dimensions of max(q*min, q*max) with min/max taken
/// directly over the page's keys; 0 elsewhere.
std::vector<double> quest_page_scores(const AttnShape& shape, const float* q, const float* k, int page);

/// Post-softmax mass [n_kv_heads][n_q_tiles][n_k_tiles] (n_q == n_k), summed over the group's heads and tile rows;
/// the softmax is over each row's visible (causal, in-window) keys.
std::vector<double> tile_mass_post_softmax(const AttnShape& shape, int tile, const float* q, const float* k);

/// Max scaled raw score per (KV head, query tile, key tile) over visible keys; 0 for key tiles with none (after the
/// diagonal or outside every row's window).
std::vector<double> tile_max_score(const AttnShape& shape, int tile, const float* q, const float* k);

/// Post-softmax probability per (KV head, query tile, key) [n_kv_heads][n_q_tiles][n_k], summed over the group's
/// heads and tile rows, for the candidate keys of each query tile only (strictly before it, seen by some row of it);
/// 0 elsewhere.
std::vector<double> token_mass_post_softmax(const AttnShape& shape, int tile, const float* q, const float* k);

/// Max scaled raw score per (KV head, query tile, candidate key) over the rows that see the key; 0 elsewhere.
std::vector<double> token_max_score(const AttnShape& shape, int tile, const float* q, const float* k);

/// Keys before query tile q_tile that some query of the tile sees, found by trying every (query, key) pair.
std::vector<int> candidate_keys(int q_tile, int tile, int window);

/// Budget in keys of query tile qt of an n_keys sequence, written out from the rule's definition (attention_types.h)
/// and capped by candidate_keys().
int token_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window = 0);

/// Top-k keys by a full stable sort of the candidates (score descending, key ascending); lists ascending.
TokenSelection select_topk_tokens(const TokenMass& scores, const TopKRule& rule);

/// Key tiles before query tile q_tile holding a key some query of the tile sees (window 0 = none), found by trying
/// every (query, key) pair.
std::vector<int> candidate_tiles(int q_tile, int tile, int window);

/// Budget in key tiles of query tile qt of an n_keys sequence, written out from the rule's definition and capped by
/// candidate_tiles().
int topk_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window = 0);

/// Top-k by a full stable sort of the candidates under scores.window (score descending, tile ascending); lists
/// ascending.
TileSelection select_topk(const TileMass& scores, const TopKRule& rule);

/// Recall and Jaccard from explicit sets, exactly as tile_similarity.h defines them.
TileSimilarity similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b, const TileSelection& sel_a,
                          int head_a, int q_tile);

/// Random q [n_q][hq][d], k and v [hkv][kv_stride][d] with kv_stride = n_k + 3 (rows past n_k hold NaN, so a
/// kernel that reads beyond the valid keys is caught), scale 1/sqrt(d).
struct AttnInputs {
    AttnShape shape;
    std::vector<float> q, k, v;
};
AttnInputs random_inputs(int n_q_heads, int n_kv_heads, int head_dim, int n_q, int n_k, uint64_t seed);

/// Test inputs: n floats uniform in [lo, hi) from a seeded generator.
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

/// Max |a - b| over n values; infinity if any value is NaN or infinite.
double max_abs_diff(const float* a, const double* b, size_t n);
double max_abs_diff(const float* a, const float* b, size_t n);

}  // namespace kascade::reference
