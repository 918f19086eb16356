// kernels/decode_head_scores.h: the attention of one decode query per query head, unpooled: the scaled raw scores
// and their softmax over every key the query sees. The OmniKV and LessIsMore baselines rank keys by these (OmniKV the
// probabilities' maximum over all heads, LessIsMore each head's raw scores), where the Kascade anchors pool per GQA
// group (kernels/decode_scoring.h).
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// scores [n_q_heads][n_k]: scale * q_h . k_j for the keys j inside the query's window (AttnShape::
/// effective_window(); the query is at position n_k - 1), -inf for the keys before it. Heads in parallel.
/// q: [n_q_heads][head_dim]; k: [n_kv_heads][kv_stride][head_dim]; shape.n_q must be 1.
void decode_head_scores(const AttnShape& shape, const float* q, KvPtr k, float* scores);

/// The same rows turned into softmax probabilities in place (keys outside the window get 0).
void decode_head_probabilities(const AttnShape& shape, const float* q, KvPtr k, float* probabilities);

}  // namespace kascade
