// kernels/topk_tiles.cpp: per (KV head, query tile) selection of the highest-scoring key tiles before the diagonal.
#include "kernels/topk_tiles.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/kernel_assert.h"

namespace kascade {

int topk_tile_budget(const TopKRule& rule, int q_tile, int tile, int window) {
    KASCADE_KERNEL_ASSERT(tile > 0 && q_tile >= 0 && window >= 0);
    KASCADE_KERNEL_ASSERT(rule.tiles >= 0 && rule.pct >= 0 && rule.pct <= 100 && rule.k_min_tokens >= 0);
    int64_t tiles = 0;
    if (rule.tiles > 0) {
        tiles = rule.tiles;
    } else if (rule.pct > 0) {
        // The paper's k = max(k_min, floor(p% of the context)), the context being what the tile's last query sees.
        int64_t visible = (static_cast<int64_t>(q_tile) + 1) * tile;
        if (window > 0) visible = std::min<int64_t>(visible, window);
        const auto pct_tokens = static_cast<int64_t>(std::floor(static_cast<double>(rule.pct) * visible / 100.0));
        const int64_t tokens = std::max<int64_t>(rule.k_min_tokens, pct_tokens);
        tiles = (tokens + tile - 1) / tile;
    }
    return static_cast<int>(std::min<int64_t>(tiles, q_tile - first_window_tile(q_tile, tile, window)));
}

TileSelection select_topk_tiles(const TileMass& scores, const TopKRule& rule) {
    KASCADE_KERNEL_ASSERT(scores.tile > 0 && scores.n_k_tiles >= scores.n_q_tiles && scores.window >= 0);
    KASCADE_KERNEL_ASSERT(scores.mass.size() ==
                          static_cast<size_t>(scores.n_kv_heads) * scores.n_q_tiles * scores.n_k_tiles);
    TileSelection sel;
    sel.n_kv_heads = scores.n_kv_heads;
    sel.n_q_tiles = scores.n_q_tiles;
    sel.tile = scores.tile;
    for (int qt = 0; qt < scores.n_q_tiles; ++qt)
        sel.max_k = std::max(sel.max_k, topk_tile_budget(rule, qt, sel.tile, scores.window));
    sel.count.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles, 0);
    sel.tiles.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);

    const int n_items = sel.n_kv_heads * sel.n_q_tiles;
    const size_t per_thread = std::max(1, scores.n_q_tiles);
    std::vector<int32_t> scratch(per_thread * omp_get_max_threads());
#pragma omp parallel
    {
        int32_t* cand = scratch.data() + per_thread * omp_get_thread_num();
#pragma omp for schedule(dynamic, 16)
        for (int item = 0; item < n_items; ++item) {
            const int h = item / sel.n_q_tiles, qt = item % sel.n_q_tiles;
            const int k = topk_tile_budget(rule, qt, sel.tile, scores.window);
            const float* row = scores.row(h, qt);
            const int first = first_window_tile(qt, sel.tile, scores.window);
            const int n_cand = qt - first;
            std::iota(cand, cand + n_cand, first);
            if (k < n_cand) {
                // Higher score first, then lower tile index: a strict total order, so the set is deterministic.
                // NaN ranks as -inf so a poisoned score can never be chosen over a real one.
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
            std::copy(cand, cand + k, sel.list(h, qt));
            sel.count[item] = k;
        }
    }
    return sel;
}

}  // namespace kascade
