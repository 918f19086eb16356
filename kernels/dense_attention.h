// kernels/dense_attention.h: exact causal attention, FlashAttention-style (tiled, online softmax, never a T x T
// matrix). Layouts and tile conventions: kernels/attention_types.h.
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// Causal prefill: every query row i (position p = n_k - n_q + i) attends to keys 0..p, or with shape.window = w to
/// keys p - w < j <= p (key blocks outside every row's window are skipped).
/// q, out: [n_q][n_q_heads][head_dim]; k, v: [n_kv_heads][kv_stride][head_dim].
/// lse (optional, may be null): [n_q_heads][n_q] receives the log-sum-exp of each row's scaled scores, so a second
/// pass can recover exact softmax probabilities (see tile_mass_post_softmax).
void attn_dense_prefill(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out, float* lse = nullptr);

/// Decode: one query row per head (shape.n_q == 1, position n_k - 1) against the whole cache, or only its last
/// shape.window keys. The keys are split across threads and the partial softmax states merged.
void attn_dense_decode(const AttnShape& shape, const float* q, KvPtr k, KvPtr v, float* out);

}  // namespace kascade
