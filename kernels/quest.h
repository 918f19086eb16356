// kernels/quest.h: Quest (Tang et al., 2024) page metadata and page scores for decode.
//
// Keys are grouped in pages of `page` consecutive positions (page x holds keys x*page .. (x+1)*page - 1). Per KV head
// and page the cache keeps the element-wise min and max of the page's key vectors. For a query q the page's score is
// the upper bound sum_d max(q_d * min_d, q_d * max_d) of q . k over every key k of the page, summed over the query
// heads of the GQA group (unscaled: the softmax scale does not change the ranking). A decode step attends to the top
// pages by this score plus the query's own (possibly partial) page, with the budget rules of kernels/decode_scoring.h
// at tile = page.
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace kascade {

/// One layer's page bounds as the KV cache stores them. page == 0 means the cache keeps none.
struct KeyPageBounds {
    int page = 0;                ///< keys per page
    int page_stride = 0;         ///< pages of room per KV head
    const float* min = nullptr;  ///< [n_kv_heads][page_stride][head_dim] element-wise min of the page's keys
    const float* max = nullptr;  ///< same layout, element-wise max
};

/// Starts (first == true) or widens the bounds of one page with n key rows [n][head_dim].
/// min, max: [head_dim].
void key_page_bounds_add(KvPtr keys, int n, int head_dim, bool first, float* min, float* max);

/// Quest page scores of one decode query (shape.n_q == 1, q [n_q_heads][head_dim]) for every page of the cache:
/// scores->row(h, 0)[x] for the candidate pages x (before the query's page, holding a key inside its window, see
/// decode_tile_budget at tile = bounds.page), 0 for the others. scores is a decode TileMass (n_q_tiles == 1, tile =
/// page), so select_decode_tiles() picks the top pages.
void quest_page_scores(const AttnShape& shape, const float* q, const KeyPageBounds& bounds, TileMass* scores);

}  // namespace kascade
