// kernels/tile_mass.h: pooling of attention per (KV head, query tile, key tile), the signal an anchor layer uses to
// choose its top-k key tiles. Prefill shapes only (n_q == n_k). With shape.window every variant sees only the keys
// inside each row's window (post-softmax mass is 0 outside it) and records the window in TileMass::window.
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// Post-softmax mass (the paper's pooling) in a second pass over Q.K, re-using the per-row log-sum-exp `lse`
/// ([n_q_heads][n_q]) from attn_dense_prefill so that no V work is repeated.
void tile_mass_post_softmax(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse,
                            TileMass* mass);

/// Dense output and post-softmax mass in one pass (the row statistics are finished per query tile before pooling).
void attn_dense_prefill_with_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, float* out,
                                  TileMass* mass);

/// Log-sum-exp of each row only (no V), e.g. as the first pass before tile_mass_post_softmax when no dense output is
/// needed (attn_tile_mass does both in one pass and is what anchor layers run).
void attn_row_lse(const AttnShape& shape, const float* q, KvPtr k, float* lse);

/// Post-softmax mass in one pass over Q.K and no V work at all: the cheapest way for an anchor layer that computes
/// its own output sparsely to get its pooling signal (the Kascade anchor step runs it). It matches the double
/// reference to the same tolerance as the two-pass tile_mass_post_softmax (tests/kernels/test_tile_mass.cpp). Each
/// query block keeps, per key tile, the partial sum of exp2(score - running max) together with that running max, and
/// rescales them once the row statistics are final. lse (optional) as in attn_dense_prefill.
void attn_tile_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, TileMass* mass, float* lse = nullptr);

/// Pre-softmax ablation: max over the group's query heads and the tile's rows of the raw scaled score per key tile.
void tile_max_score(const AttnShape& shape, int tile, const float* q, KvPtr k, TileMass* scores);

/// Token granularity (the paper's pooling): post-softmax probability of every candidate key of every query tile,
/// summed over the group's query heads and the tile's rows, [n_kv_heads][n_q_tiles][n_k]. Two passes over Q.K and no V
/// work: the row log-sum-exp (attn_row_lse), then the exact probabilities pooled per key. lse (optional) as in
/// attn_dense_prefill.
void attn_token_mass(const AttnShape& shape, int tile, const float* q, KvPtr k, TokenMass* mass, float* lse = nullptr);

/// The pooling pass of attn_token_mass alone, from a known row log-sum-exp `lse` ([n_q_heads][n_q]).
void token_mass_post_softmax(const AttnShape& shape, int tile, const float* q, KvPtr k, const float* lse,
                             TokenMass* mass);

/// Pre-softmax ablation at token granularity: max over the group's query heads and the tile's rows (those whose window
/// holds the key) of the raw scaled score of each candidate key.
void token_max_score(const AttnShape& shape, int tile, const float* q, KvPtr k, TokenMass* scores);

}  // namespace kascade
