// kernels/tile_similarity.h: how well one layer's tile selection serves another layer (Kascade's reuse criterion).
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// Similarity of layer b to anchor layer a for one (KV head of b, KV head of a, query tile):
///   recall  = sum of b's mass over a's selected tiles / sum of b's mass over b's own selected tiles
///   jaccard = |sel_a ∩ sel_b| / |sel_a ∪ sel_b|
/// Query tiles with no candidates (an empty selection on both sides) count as 1 for both.
struct TileSimilarity {
    float recall = 0;
    float jaccard = 0;
};

TileSimilarity tile_similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b,
                               const TileSelection& sel_a, int head_a, int q_tile);

/// The same at token granularity: the selections are individual keys, the mass is per key.
TileSimilarity token_similarity(const TokenMass& mass_b, const TokenSelection& sel_b, int head_b,
                                const TokenSelection& sel_a, int head_a, int q_tile);

/// Aggregates over query tiles for one head pair: mean and min of recall and jaccard. Tiles with no candidates
/// (q_tile == 0) are skipped.
struct HeadPairSimilarity {
    float recall_mean = 0, recall_min = 0;
    float jaccard_mean = 0, jaccard_min = 0;
};

HeadPairSimilarity head_pair_similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b,
                                        const TileSelection& sel_a, int head_a);
HeadPairSimilarity head_pair_similarity(const TokenMass& mass_b, const TokenSelection& sel_b, int head_b,
                                        const TokenSelection& sel_a, int head_a);

}  // namespace kascade
