// kernels/tile_similarity.cpp: recall and Jaccard of one layer's tile selection against another's.
#include "kernels/tile_similarity.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace kascade {
namespace {

// One definition for both granularities: Mass / Selection are TileMass / TileSelection (ids are key tiles) or
// TokenMass / TokenSelection (ids are keys); n_ids bounds the ids.
template <class Mass, class Selection>
TileSimilarity similarity_of(const Mass& mass_b, const Selection& sel_b, int head_b, const Selection& sel_a, int head_a,
                             int q_tile, int n_ids) {
    KASCADE_ASSERT(sel_a.n_q_tiles == sel_b.n_q_tiles && mass_b.n_q_tiles == sel_b.n_q_tiles);
    KASCADE_ASSERT(q_tile >= 0 && q_tile < sel_b.n_q_tiles);
    KASCADE_ASSERT(head_a >= 0 && head_a < sel_a.n_kv_heads && head_b >= 0 && head_b < sel_b.n_kv_heads);
    const int32_t* a = sel_a.list(head_a, q_tile);
    const int32_t* b = sel_b.list(head_b, q_tile);
    const int na = sel_a.size(head_a, q_tile), nb = sel_b.size(head_b, q_tile);
    if (na == 0 && nb == 0) return {1.0f, 1.0f};
    const float* mass = mass_b.row(head_b, q_tile);
    double on_a = 0, on_b = 0;
    for (int i = 0; i < na; ++i) {
        KASCADE_ASSERT(a[i] >= 0 && a[i] < n_ids);
        on_a += mass[a[i]];
    }
    for (int i = 0; i < nb; ++i) {
        KASCADE_ASSERT(b[i] >= 0 && b[i] < n_ids);
        on_b += mass[b[i]];
    }
    // Both lists are ascending (select_topk_tiles / select_topk_tokens guarantee it): count the intersection by
    // merging.
    int both = 0;
    for (int i = 0, j = 0; i < na && j < nb;) {
        if (a[i] == b[j]) {
            ++both;
            ++i;
            ++j;
        } else if (a[i] < b[j]) {
            ++i;
        } else {
            ++j;
        }
    }
    TileSimilarity r;
    // b's own tiles hold no mass only if its whole row is zero; then any selection serves it equally well.
    r.recall = on_b > 0 ? static_cast<float>(on_a / on_b) : 1.0f;
    r.jaccard = static_cast<float>(both) / static_cast<float>(na + nb - both);
    return r;
}

template <class Selection, class PerTile>
HeadPairSimilarity aggregate(const Selection& sel_b, PerTile per_tile) {
    HeadPairSimilarity r{1.0f, 1.0f, 1.0f, 1.0f};
    const int n = sel_b.n_q_tiles;
    if (n <= 1) return r;  // no query tile has candidates: nothing can be lost by reusing
    double recall_sum = 0, jaccard_sum = 0;
    r.recall_min = r.jaccard_min = std::numeric_limits<float>::infinity();
    for (int qt = 1; qt < n; ++qt) {
        const TileSimilarity s = per_tile(qt);
        recall_sum += s.recall;
        jaccard_sum += s.jaccard;
        r.recall_min = std::min(r.recall_min, s.recall);
        r.jaccard_min = std::min(r.jaccard_min, s.jaccard);
    }
    r.recall_mean = static_cast<float>(recall_sum / (n - 1));
    r.jaccard_mean = static_cast<float>(jaccard_sum / (n - 1));
    return r;
}

}  // namespace

TileSimilarity tile_similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b,
                               const TileSelection& sel_a, int head_a, int q_tile) {
    return similarity_of(mass_b, sel_b, head_b, sel_a, head_a, q_tile, mass_b.n_k_tiles);
}

TileSimilarity token_similarity(const TokenMass& mass_b, const TokenSelection& sel_b, int head_b,
                                const TokenSelection& sel_a, int head_a, int q_tile) {
    return similarity_of(mass_b, sel_b, head_b, sel_a, head_a, q_tile, mass_b.n_keys);
}

HeadPairSimilarity head_pair_similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b,
                                        const TileSelection& sel_a, int head_a) {
    return aggregate(sel_b, [&](int qt) { return tile_similarity(mass_b, sel_b, head_b, sel_a, head_a, qt); });
}

HeadPairSimilarity head_pair_similarity(const TokenMass& mass_b, const TokenSelection& sel_b, int head_b,
                                        const TokenSelection& sel_a, int head_a) {
    return aggregate(sel_b, [&](int qt) { return token_similarity(mass_b, sel_b, head_b, sel_a, head_a, qt); });
}

}  // namespace kascade
