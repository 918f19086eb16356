// kernels/topk_tiles.cpp: per (KV head, query tile) selection of the highest-scoring key tiles or keys before the
// diagonal.
#include "kernels/topk_tiles.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/error.h"

namespace kascade {
namespace {

int64_t pct_of(float pct, int64_t context) {
    return static_cast<int64_t>(std::floor(static_cast<double>(pct) * context / 100.0));
}

// Fills count / ids of a selection from one score row per (head, query tile): per item the `budget(qt)` best of the
// candidates first(qt) .. end(qt)-1, higher score first, then lower index (a strict total order, so the set is
// deterministic); NaN ranks as -inf so a poisoned score can never be chosen over a real one.
template <typename RowOf, typename Budget, typename First, typename End>
void select_rows(int n_kv_heads, int n_q_tiles, int max_candidates, int max_k, RowOf row_of, Budget budget, First first,
                 End end, int32_t* count, int32_t* ids) {
    const int n_items = n_kv_heads * n_q_tiles;
    const size_t per_thread = std::max(1, max_candidates);
    std::vector<int32_t> scratch(per_thread * omp_get_max_threads());
#pragma omp parallel
    {
        int32_t* cand = scratch.data() + per_thread * omp_get_thread_num();
#pragma omp for schedule(dynamic, 16)
        for (int item = 0; item < n_items; ++item) {
            const int h = item / n_q_tiles, qt = item % n_q_tiles;
            const int k = budget(qt);
            const float* row = row_of(h, qt);
            const int lo = first(qt);
            const int n_cand = end(qt) - lo;
            std::iota(cand, cand + n_cand, lo);
            if (k < n_cand) {
                const auto key = [row](int32_t t) {
                    const float x = row[t];
                    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
                };
                std::nth_element(cand, cand + k, cand + n_cand, [&](int32_t a, int32_t b) {
                    const float ka = key(a), kb = key(b);
                    return ka > kb || (ka == kb && a < b);
                });
                std::sort(cand, cand + k);
            }
            std::copy(cand, cand + k, ids + static_cast<int64_t>(item) * max_k);
            count[item] = k;
        }
    }
}

}  // namespace

int64_t topk_key_count(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    KASCADE_ASSERT(tile > 0 && q_tile >= 0 && window >= 0 && n_keys >= 0);
    KASCADE_ASSERT(rule.tiles >= 0 && rule.pct >= 0 && rule.pct <= 100 && rule.k_min_tokens >= 0);
    KASCADE_ASSERT(rule.round_k >= 0);
    int64_t k = 0;
    if (rule.tiles > 0) {
        k = static_cast<int64_t>(rule.tiles) * tile;
    } else if (rule.pct > 0) {
        const auto in_window = [window](int64_t context) {
            return window > 0 ? std::min<int64_t>(context, window) : context;
        };
        switch (rule.k_rule) {
            case KRule::Sequence: {
                // The reference code's k = min(max(128, int(p/100 * L)), L), then `k -= tile` for the diagonal.
                KASCADE_ASSERT(n_keys > 0);
                const int64_t length = in_window(n_keys);
                k = std::min(std::max<int64_t>(rule.k_min_tokens, pct_of(rule.pct, length)), length) - tile;
                break;
            }
            case KRule::Rolling:
                k = std::max<int64_t>(rule.k_min_tokens,
                                      pct_of(rule.pct, in_window(static_cast<int64_t>(q_tile) * tile)));
                break;
            case KRule::Visible:
                k = std::max<int64_t>(rule.k_min_tokens,
                                      pct_of(rule.pct, in_window((static_cast<int64_t>(q_tile) + 1) * tile)));
                break;
        }
    }
    if (rule.round_k > 0) k = (k + rule.round_k - 1) / rule.round_k * rule.round_k;
    return std::max<int64_t>(k, 0);
}

int topk_tile_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    const int64_t tiles = (topk_key_count(rule, q_tile, tile, n_keys, window) + tile - 1) / tile;
    return static_cast<int>(std::min<int64_t>(tiles, q_tile - first_window_tile(q_tile, tile, window)));
}

int topk_token_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    const int64_t keys = topk_key_count(rule, q_tile, tile, n_keys, window);
    const int64_t candidates = static_cast<int64_t>(q_tile) * tile - first_window_key(q_tile, tile, window);
    return static_cast<int>(std::min(keys, candidates));
}

TileSelection select_topk_tiles(const TileMass& scores, const TopKRule& rule) {
    KASCADE_ASSERT(scores.tile > 0 && scores.n_k_tiles >= scores.n_q_tiles && scores.window >= 0);
    KASCADE_ASSERT(scores.n_keys > (scores.n_k_tiles - 1) * scores.tile &&
                   scores.n_keys <= scores.n_k_tiles * scores.tile);
    KASCADE_ASSERT(scores.mass.size() == static_cast<size_t>(scores.n_kv_heads) * scores.n_q_tiles * scores.n_k_tiles);
    TileSelection sel;
    sel.n_kv_heads = scores.n_kv_heads;
    sel.n_q_tiles = scores.n_q_tiles;
    sel.tile = scores.tile;
    const auto budget = [&](int qt) { return topk_tile_budget(rule, qt, sel.tile, scores.n_keys, scores.window); };
    for (int qt = 0; qt < scores.n_q_tiles; ++qt) sel.max_k = std::max(sel.max_k, budget(qt));
    sel.count.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles, 0);
    sel.tiles.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);
    select_rows(
        sel.n_kv_heads, sel.n_q_tiles, scores.n_q_tiles, sel.max_k, [&](int h, int qt) { return scores.row(h, qt); },
        budget, [&](int qt) { return first_window_tile(qt, sel.tile, scores.window); }, [](int qt) { return qt; },
        sel.count.data(), sel.tiles.data());
    return sel;
}

TokenSelection select_topk_tokens(const TokenMass& scores, const TopKRule& rule) {
    KASCADE_ASSERT(scores.tile > 0 && scores.window >= 0 && scores.n_keys > 0);
    KASCADE_ASSERT(scores.n_q_tiles == tile_count(scores.n_keys, scores.tile));
    KASCADE_ASSERT(scores.mass.size() == static_cast<size_t>(scores.n_kv_heads) * scores.n_q_tiles * scores.n_keys);
    TokenSelection sel;
    sel.n_kv_heads = scores.n_kv_heads;
    sel.n_q_tiles = scores.n_q_tiles;
    sel.tile = scores.tile;
    const auto budget = [&](int qt) { return topk_token_budget(rule, qt, sel.tile, scores.n_keys, scores.window); };
    for (int qt = 0; qt < scores.n_q_tiles; ++qt) sel.max_k = std::max(sel.max_k, budget(qt));
    sel.count.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles, 0);
    sel.keys.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);
    select_rows(
        sel.n_kv_heads, sel.n_q_tiles, scores.n_keys, sel.max_k, [&](int h, int qt) { return scores.row(h, qt); },
        budget, [&](int qt) { return first_window_key(qt, sel.tile, scores.window); },
        [&](int qt) { return qt * sel.tile; }, sel.count.data(), sel.keys.data());
    return sel;
}

}  // namespace kascade
