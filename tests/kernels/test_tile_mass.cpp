// tests/kernels/test_tile_mass.cpp: pooled post-softmax mass (second pass from LSE, one pass with the dense output,
// one pass without V) and the pre-softmax max score, against the double-precision reference, with and without a
// sliding window.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/attention_tolerance.h"
#include "kernels/dense_attention.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/tile_mass.h"

namespace kascade {
namespace {

struct MassCase {
    int n_kv_heads, group, head_dim, t, tile;
    std::string name() const {
        return "tile_mass(T=" + std::to_string(t) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",hkv=" + std::to_string(n_kv_heads) + ",d=" + std::to_string(head_dim) +
               ",tile=" + std::to_string(tile) + ")";
    }
};

std::vector<MassCase> mass_cases() {
    std::vector<MassCase> cases;
    for (int d : {8, 64, 128})
        for (int group : {1, 2, 3, 4})
            for (int t : {1, 17})
                for (int tile : {16, 32, 64}) cases.push_back({2, group, d, t, tile});
    cases.push_back({1, 1, 64, 512, 16});
    cases.push_back({1, 3, 8, 512, 32});
    cases.push_back({1, 4, 128, 512, 64});
    cases.push_back({1, 2, 64, 1000, 32});
    return cases;
}

double max_mass_error(const TileMass& got, const std::vector<double>& ref, int n_kv_heads, int t, int tile) {
    if (got.n_kv_heads != n_kv_heads || got.n_q_tiles != tile_count(t, tile) || got.n_k_tiles != tile_count(t, tile) ||
        got.tile != tile || got.mass.size() != ref.size()) {
        return INFINITY;
    }
    return reference::max_abs_diff(got.mass.data(), ref.data(), ref.size());
}

TEST(TileMass, AllVariantsMatchReference) {
    for (const MassCase& c : mass_cases()) {
        SCOPED_TRACE(c.name());
        const int hq = c.n_kv_heads * c.group;
        const auto in = reference::random_inputs(hq, c.n_kv_heads, c.head_dim, c.t, c.t, 31);
        const AttnShape& s = in.shape;
        const std::vector<double> ref = reference::tile_mass_post_softmax(s, c.tile, in.q.data(), in.k.data());

        std::vector<float> lse(static_cast<size_t>(hq) * c.t);
        attn_row_lse(s, in.q.data(), in.k.data(), lse.data());
        TileMass two_pass;
        tile_mass_post_softmax(s, c.tile, in.q.data(), in.k.data(), lse.data(), &two_pass);
        EXPECT_LT(max_mass_error(two_pass, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance)
            << "row_lse + post_softmax";

        TileMass with_out;
        std::vector<float> out(in.q.size());
        attn_dense_prefill_with_mass(s, c.tile, in.q.data(), in.k.data(), in.v.data(), out.data(), &with_out);
        EXPECT_LT(max_mass_error(with_out, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance) << "with_mass";
        if (c.t <= 512) {  // the output path is the dense kernel's; checking it at every length would double the cost
            const std::vector<double> ref_out = reference::dense_attention(s, in.q.data(), in.k.data(), in.v.data());
            EXPECT_LT(reference::max_abs_diff(out.data(), ref_out.data(), out.size()), kAttentionTolerance) << "output";
        }

        TileMass no_v;
        std::vector<float> lse1(lse.size());
        attn_tile_mass(s, c.tile, in.q.data(), in.k.data(), &no_v, lse1.data());
        EXPECT_LT(max_mass_error(no_v, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance) << "attn_tile_mass";
        EXPECT_LT(reference::max_abs_diff(lse1.data(), lse.data(), lse.size()), kAttentionTolerance)
            << "attn_tile_mass lse";

        // Every softmax row sums to 1: a query tile's row sums to (heads per group) x (rows in the tile).
        for (int h = 0; h < c.n_kv_heads; ++h) {
            for (int qt = 0; qt < two_pass.n_q_tiles; ++qt) {
                const int rows = std::min(c.tile, c.t - qt * c.tile);
                double sum = 0, sum1 = 0;
                for (int kt = 0; kt < two_pass.n_k_tiles; ++kt) {
                    sum += two_pass.row(h, qt)[kt];
                    sum1 += no_v.row(h, qt)[kt];
                    if (kt > qt) {
                        EXPECT_EQ(two_pass.row(h, qt)[kt], 0.0f) << "mass after the diagonal";
                    }
                }
                EXPECT_NEAR(sum, c.group * rows, 1e-4 * c.group * rows) << "kv_head " << h << " q_tile " << qt;
                EXPECT_NEAR(sum1, c.group * rows, 1e-4 * c.group * rows) << "kv_head " << h << " q_tile " << qt;
            }
        }
    }
}

struct WindowMassCase {
    int n_kv_heads, group, head_dim, t, tile, window;
    std::string name() const {
        return "tile_mass_window(T=" + std::to_string(t) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",hkv=" + std::to_string(n_kv_heads) + ",d=" + std::to_string(head_dim) +
               ",tile=" + std::to_string(tile) + ",window=" + std::to_string(window) + ")";
    }
};

std::vector<WindowMassCase> window_mass_cases() {
    std::vector<WindowMassCase> cases;
    for (int d : {64, 128})
        for (int group : {1, 4})
            for (int t : {31, 33, 129})
                for (int w : {1, 7, 33, 100})
                    if (w < t) cases.push_back({2, group, d, t, (t + w + d) % 2 == 0 ? 16 : 32, w});
    cases.push_back({1, 2, 64, 300, 16, 40});
    cases.push_back({1, 3, 64, 300, 64, 130});
    return cases;
}

TEST(TileMass, WindowedVariantsMatchReference) {
    for (const WindowMassCase& c : window_mass_cases()) {
        SCOPED_TRACE(c.name());
        const int hq = c.n_kv_heads * c.group;
        auto in = reference::random_inputs(hq, c.n_kv_heads, c.head_dim, c.t, c.t, 33);
        in.shape.window = c.window;
        const AttnShape& s = in.shape;
        const std::vector<double> ref = reference::tile_mass_post_softmax(s, c.tile, in.q.data(), in.k.data());
        std::vector<double> ref_lse;
        reference::dense_attention(s, in.q.data(), in.k.data(), in.v.data(), &ref_lse);

        std::vector<float> lse(static_cast<size_t>(hq) * c.t);
        attn_row_lse(s, in.q.data(), in.k.data(), lse.data());
        EXPECT_LT(reference::max_abs_diff(lse.data(), ref_lse.data(), lse.size()), kAttentionTolerance) << "row_lse";
        TileMass two_pass;
        tile_mass_post_softmax(s, c.tile, in.q.data(), in.k.data(), lse.data(), &two_pass);
        EXPECT_LT(max_mass_error(two_pass, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance)
            << "row_lse + post_softmax";

        TileMass with_out;
        std::vector<float> out(in.q.size());
        attn_dense_prefill_with_mass(s, c.tile, in.q.data(), in.k.data(), in.v.data(), out.data(), &with_out);
        EXPECT_LT(max_mass_error(with_out, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance) << "with_mass";

        TileMass no_v;
        std::vector<float> lse1(lse.size());
        attn_tile_mass(s, c.tile, in.q.data(), in.k.data(), &no_v, lse1.data());
        EXPECT_LT(max_mass_error(no_v, ref, c.n_kv_heads, c.t, c.tile), kAttentionTolerance) << "attn_tile_mass";
        EXPECT_LT(reference::max_abs_diff(lse1.data(), ref_lse.data(), lse.size()), kAttentionTolerance)
            << "tile_mass lse";

        // Every variant records the window; tiles wholly outside it hold exactly 0, and rows still sum to 1.
        for (const TileMass* m : {&two_pass, &with_out, &no_v}) {
            EXPECT_EQ(m->window, c.window);
            for (int h = 0; h < c.n_kv_heads; ++h) {
                for (int qt = 0; qt < m->n_q_tiles; ++qt) {
                    const int rows = std::min(c.tile, c.t - qt * c.tile);
                    double sum = 0;
                    for (int kt = 0; kt < m->n_k_tiles; ++kt) {
                        sum += m->row(h, qt)[kt];
                        if (kt < first_window_tile(qt, c.tile, c.window) || kt > qt) {
                            EXPECT_EQ(m->row(h, qt)[kt], 0.0f) << "q_tile " << qt << " k_tile " << kt;
                        }
                    }
                    EXPECT_NEAR(sum, c.group * rows, 1e-4 * c.group * rows) << "kv_head " << h << " q_tile " << qt;
                }
            }
        }

        const std::vector<double> ref_max = reference::tile_max_score(s, c.tile, in.q.data(), in.k.data());
        TileMass max_score;
        tile_max_score(s, c.tile, in.q.data(), in.k.data(), &max_score);
        ASSERT_EQ(max_score.mass.size(), ref_max.size());
        EXPECT_EQ(max_score.window, c.window);
        double worst = 0;
        for (size_t i = 0; i < ref_max.size(); ++i)
            worst = std::max(worst, std::abs(max_score.mass[i] - ref_max[i]) / std::max(1.0, std::abs(ref_max[i])));
        EXPECT_LT(worst, kAttentionTolerance) << "tile_max_score";
    }
}

TEST(TileMass, WindowCoveringEveryKeyEqualsNoWindow) {
    for (int t : {1, 31, 33, 129, 300}) {
        SCOPED_TRACE("tile_mass_window_covering(T=" + std::to_string(t) + ")");
        auto in = reference::random_inputs(6, 2, 64, t, t, 43);
        const auto all_variants = [&](TileMass* with_out, TileMass* no_v, TileMass* two_pass, TileMass* max_score) {
            std::vector<float> out(in.q.size()), lse(6 * t);
            attn_dense_prefill_with_mass(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), out.data(), with_out);
            attn_tile_mass(in.shape, 16, in.q.data(), in.k.data(), no_v, lse.data());
            tile_mass_post_softmax(in.shape, 16, in.q.data(), in.k.data(), lse.data(), two_pass);
            tile_max_score(in.shape, 16, in.q.data(), in.k.data(), max_score);
        };
        TileMass a0, b0, c0, d0;
        all_variants(&a0, &b0, &c0, &d0);
        for (int w : {t, t + 7}) {
            in.shape.window = w;
            TileMass a, b, c, d;
            all_variants(&a, &b, &c, &d);
            EXPECT_EQ(a.mass, a0.mass) << "window " << w;
            EXPECT_EQ(b.mass, b0.mass) << "window " << w;
            EXPECT_EQ(c.mass, c0.mass) << "window " << w;
            EXPECT_EQ(d.mass, d0.mass) << "window " << w;
            EXPECT_EQ(a.window, 0);  // the window cuts nothing: selections see no window either
        }
    }
}

TEST(TileMass, MaxScoreMatchesReference) {
    for (const MassCase& c : mass_cases()) {
        if (c.t == 1000) continue;  // same code path as T = 512 here; saves the slowest references
        SCOPED_TRACE("max_score " + c.name());
        const auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 37);
        const std::vector<double> ref = reference::tile_max_score(in.shape, c.tile, in.q.data(), in.k.data());
        TileMass got;
        tile_max_score(in.shape, c.tile, in.q.data(), in.k.data(), &got);
        ASSERT_EQ(got.mass.size(), ref.size());
        double worst = 0;
        for (size_t i = 0; i < ref.size(); ++i)
            worst = std::max(worst, std::abs(got.mass[i] - ref[i]) / std::max(1.0, std::abs(ref[i])));
        EXPECT_LT(worst, kAttentionTolerance);
    }
}

TEST(TileMass, ThreadCountDoesNotChangeResults) {
    const auto in = reference::random_inputs(6, 2, 64, 600, 600, 41);
    const int saved = omp_get_max_threads();
    TileMass a1, a2, b1, b2, c1, c2;
    std::vector<float> out1(in.q.size()), out2(in.q.size()), lse(6 * 600);
    attn_row_lse(in.shape, in.q.data(), in.k.data(), lse.data());
    omp_set_num_threads(1);
    attn_dense_prefill_with_mass(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), out1.data(), &a1);
    attn_tile_mass(in.shape, 16, in.q.data(), in.k.data(), &b1);
    tile_mass_post_softmax(in.shape, 64, in.q.data(), in.k.data(), lse.data(), &c1);
    omp_set_num_threads(2);
    attn_dense_prefill_with_mass(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), out2.data(), &a2);
    attn_tile_mass(in.shape, 16, in.q.data(), in.k.data(), &b2);
    tile_mass_post_softmax(in.shape, 64, in.q.data(), in.k.data(), lse.data(), &c2);
    omp_set_num_threads(saved);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(a1.mass, a2.mass);
    EXPECT_EQ(b1.mass, b2.mass);
    EXPECT_EQ(c1.mass, c2.mass);
}

TEST(TileMass, ThreadCountDoesNotChangeWindowedResults) {
    auto in = reference::random_inputs(6, 2, 64, 600, 600, 47);
    in.shape.window = 150;
    const int saved = omp_get_max_threads();
    TileMass a1, a2, b1, b2, c1, c2, d1, d2;
    std::vector<float> out1(in.q.size()), out2(in.q.size()), lse(6 * 600);
    attn_row_lse(in.shape, in.q.data(), in.k.data(), lse.data());
    omp_set_num_threads(1);
    attn_dense_prefill_with_mass(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), out1.data(), &a1);
    attn_tile_mass(in.shape, 16, in.q.data(), in.k.data(), &b1);
    tile_mass_post_softmax(in.shape, 64, in.q.data(), in.k.data(), lse.data(), &c1);
    tile_max_score(in.shape, 16, in.q.data(), in.k.data(), &d1);
    omp_set_num_threads(2);
    attn_dense_prefill_with_mass(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), out2.data(), &a2);
    attn_tile_mass(in.shape, 16, in.q.data(), in.k.data(), &b2);
    tile_mass_post_softmax(in.shape, 64, in.q.data(), in.k.data(), lse.data(), &c2);
    tile_max_score(in.shape, 16, in.q.data(), in.k.data(), &d2);
    omp_set_num_threads(saved);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(a1.mass, a2.mass);
    EXPECT_EQ(b1.mass, b2.mass);
    EXPECT_EQ(c1.mass, c2.mass);
    EXPECT_EQ(d1.mass, d2.mass);
}

}  // namespace
}  // namespace kascade
