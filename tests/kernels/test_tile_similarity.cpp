// tests/kernels/test_tile_similarity.cpp: recall and Jaccard of tile selections against the set-based reference,
// a hand-worked example, and the mean/min aggregation over query tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/attention_reference.h"
#include "kernels/tile_similarity.h"
#include "kernels/topk_tiles.h"

namespace kascade {
namespace {

TileMass random_mass(int n_kv_heads, int n_tiles, int tile, uint64_t seed) {
    TileMass m;
    m.n_kv_heads = n_kv_heads;
    m.n_q_tiles = m.n_k_tiles = n_tiles;
    m.tile = tile;
    m.n_keys = n_tiles * tile;
    m.mass = reference::random_floats(static_cast<size_t>(n_kv_heads) * n_tiles * n_tiles, seed, 0.0f, 1.0f);
    return m;
}

TEST(TileSimilarity, HandWorkedExample) {
    // One head, 4 query tiles; on query tile 3, b keeps {0, 2} and a keeps {1, 2}.
    TileMass mass_b;
    mass_b.n_kv_heads = 1;
    mass_b.n_q_tiles = mass_b.n_k_tiles = 4;
    mass_b.tile = 16;
    mass_b.mass.assign(16, 0.0f);
    float* row = mass_b.row(0, 3);
    row[0] = 4, row[1] = 1, row[2] = 3, row[3] = 8;
    TileSelection sel_b, sel_a;
    for (TileSelection* s : {&sel_b, &sel_a}) {
        s->n_kv_heads = 1;
        s->n_q_tiles = 4;
        s->max_k = 2;
        s->tile = 16;
        s->count.assign(4, 0);
        s->tiles.assign(8, 0);
        s->count[3] = 2;
    }
    sel_b.list(0, 3)[0] = 0, sel_b.list(0, 3)[1] = 2;
    sel_a.list(0, 3)[0] = 1, sel_a.list(0, 3)[1] = 2;
    const TileSimilarity s = tile_similarity(mass_b, sel_b, 0, sel_a, 0, 3);
    EXPECT_FLOAT_EQ(s.recall, 4.0f / 7.0f);   // (1 + 3) / (4 + 3)
    EXPECT_FLOAT_EQ(s.jaccard, 1.0f / 3.0f);  // {2} / {0, 1, 2}
    const TileSimilarity empty = tile_similarity(mass_b, sel_b, 0, sel_a, 0, 1);
    EXPECT_EQ(empty.recall, 1.0f);
    EXPECT_EQ(empty.jaccard, 1.0f);
}

TEST(TileSimilarity, MatchesReferenceAndAggregates) {
    for (int n_tiles : {1, 2, 9, 40}) {
        SCOPED_TRACE("similarity(n_tiles=" + std::to_string(n_tiles) + ")");
        const TileMass mass_b = random_mass(2, n_tiles, 32, 3 + n_tiles);
        const TileMass mass_a = random_mass(3, n_tiles, 32, 4 + n_tiles);
        const TileSelection sel_b = select_topk_tiles(mass_b, TopKRule{3, 0, 0});
        const TileSelection sel_a = select_topk_tiles(mass_a, TopKRule{0, 20, 32, KRule::Visible});
        for (int hb = 0; hb < 2; ++hb) {
            for (int ha = 0; ha < 3; ++ha) {
                double recall_sum = 0, jaccard_sum = 0, recall_min = 1e9, jaccard_min = 1e9;
                for (int qt = 0; qt < n_tiles; ++qt) {
                    const TileSimilarity got = tile_similarity(mass_b, sel_b, hb, sel_a, ha, qt);
                    const TileSimilarity ref = reference::similarity(mass_b, sel_b, hb, sel_a, ha, qt);
                    EXPECT_NEAR(got.recall, ref.recall, 1e-6) << "hb " << hb << " ha " << ha << " qt " << qt;
                    EXPECT_NEAR(got.jaccard, ref.jaccard, 1e-6) << "hb " << hb << " ha " << ha << " qt " << qt;
                    if (qt == 0) continue;
                    recall_sum += ref.recall, jaccard_sum += ref.jaccard;
                    recall_min = std::min<double>(recall_min, ref.recall);
                    jaccard_min = std::min<double>(jaccard_min, ref.jaccard);
                }
                const HeadPairSimilarity agg = head_pair_similarity(mass_b, sel_b, hb, sel_a, ha);
                if (n_tiles <= 1) {
                    EXPECT_EQ(agg.recall_mean, 1.0f);
                    EXPECT_EQ(agg.jaccard_min, 1.0f);
                    continue;
                }
                EXPECT_NEAR(agg.recall_mean, recall_sum / (n_tiles - 1), 1e-6);
                EXPECT_NEAR(agg.jaccard_mean, jaccard_sum / (n_tiles - 1), 1e-6);
                EXPECT_NEAR(agg.recall_min, recall_min, 1e-6);
                EXPECT_NEAR(agg.jaccard_min, jaccard_min, 1e-6);
            }
        }
    }
}

TEST(TileSimilarity, SelfSimilarityIsOne) {
    const TileMass mass = random_mass(2, 30, 16, 5);
    const TileSelection sel = select_topk_tiles(mass, TopKRule{4, 0, 0});
    const HeadPairSimilarity s = head_pair_similarity(mass, sel, 1, sel, 1);
    EXPECT_EQ(s.recall_min, 1.0f);
    EXPECT_EQ(s.jaccard_min, 1.0f);
}

}  // namespace
}  // namespace kascade
