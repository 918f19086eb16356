// tests/kernels/test_sparse_attention.cpp: tile-sparse prefill and decode against the double-precision masked
// reference: random selections (own layer and through a KV-head map), every tile selected (= dense), sliding windows
// (keys outside the window are never attended, even in a selected or the diagonal tile), thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/attention_tolerance.h"
#include "kernels/dense_attention.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/sparse_attention.h"

namespace kascade {
namespace {

// A random ascending selection per (KV head, query tile) with up to max_k tiles before the diagonal; with max_k < 0
// every candidate tile.
TileSelection random_selection(int n_kv_heads, int n_q, int tile, int max_k, uint64_t seed) {
    TileSelection sel;
    sel.n_kv_heads = n_kv_heads;
    sel.n_q_tiles = tile_count(n_q, tile);
    sel.tile = tile;
    sel.max_k = max_k < 0 ? std::max(0, sel.n_q_tiles - 1) : max_k;
    sel.count.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles, 0);
    sel.tiles.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles * sel.max_k, -1);
    std::mt19937_64 gen(seed);
    for (int h = 0; h < n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            std::vector<int32_t> cand(qt);
            std::iota(cand.begin(), cand.end(), 0);
            int k = qt;
            if (max_k >= 0) {
                std::shuffle(cand.begin(), cand.end(), gen);
                k = std::min<int>(qt, std::uniform_int_distribution<int>(0, max_k)(gen));
                std::sort(cand.begin(), cand.begin() + k);
            }
            std::copy(cand.begin(), cand.begin() + k, sel.list(h, qt));
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = k;
        }
    }
    return sel;
}

struct SparseCase {
    int n_kv_heads, group, head_dim, t, tile, max_k;
    std::string name(const char* what) const {
        return std::string(what) + "(T=" + std::to_string(t) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",hkv=" + std::to_string(n_kv_heads) + ",d=" + std::to_string(head_dim) +
               ",tile=" + std::to_string(tile) + ",max_k=" + std::to_string(max_k) + ")";
    }
};

std::vector<SparseCase> sparse_cases() {
    std::vector<SparseCase> cases;
    for (int d : {8, 64, 128})
        for (int group : {1, 2, 3, 4})
            for (int t : {1, 17})
                for (int tile : {16, 32, 64}) cases.push_back({2, group, d, t, tile, 3});
    cases.push_back({1, 1, 64, 512, 64, 6});
    cases.push_back({1, 2, 128, 512, 16, 20});
    cases.push_back({1, 3, 8, 512, 32, 4});
    cases.push_back({1, 4, 128, 1000, 32, 8});
    return cases;
}

TEST(SparseAttention, PrefillMatchesMaskedReference) {
    for (const SparseCase& c : sparse_cases()) {
        SCOPED_TRACE(c.name("sparse_prefill"));
        const auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 51);
        // Own-layer selection, then a reuse layer reading a 3-head anchor selection through a many-to-one map.
        const TileSelection own = random_selection(c.n_kv_heads, c.t, c.tile, c.max_k, 52);
        const TileSelection anchor = random_selection(3, c.t, c.tile, c.max_k, 53);
        std::vector<int32_t> head_map(c.n_kv_heads);
        for (int h = 0; h < c.n_kv_heads; ++h) head_map[h] = (2 * h + 1) % 3;
        for (const auto& [sel, map] : {std::pair{&own, static_cast<const int32_t*>(nullptr)},
                                       std::pair{&anchor, static_cast<const int32_t*>(head_map.data())}}) {
            SCOPED_TRACE(map ? "head_map" : "own selection");
            const std::vector<double> ref =
                reference::sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), *sel, map);
            std::vector<float> out(in.q.size());
            attn_sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), *sel, map, out.data());
            EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        }
    }
}

TEST(SparseAttention, PrefillWithEveryTileEqualsDense) {
    for (const SparseCase& c : {SparseCase{2, 3, 64, 17, 16, -1}, SparseCase{1, 4, 128, 333, 32, -1},
                                SparseCase{2, 1, 8, 1000, 64, -1}, SparseCase{1, 2, 64, 512, 16, -1}}) {
        SCOPED_TRACE(c.name("sparse_prefill_all"));
        const auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.t, c.t, 61);
        const TileSelection all = random_selection(c.n_kv_heads, c.t, c.tile, -1, 0);
        const std::vector<double> ref = reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
        std::vector<float> sparse(in.q.size()), dense(in.q.size());
        attn_sparse_prefill(in.shape, c.tile, in.q.data(), in.k.data(), in.v.data(), all, nullptr, sparse.data());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), dense.data());
        EXPECT_LT(reference::max_abs_diff(sparse.data(), ref.data(), sparse.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(sparse.data(), dense.data(), sparse.size()), kAttentionTolerance);
    }
}

TEST(SparseAttention, DecodeMatchesMaskedReference) {
    for (int d : {8, 64, 128}) {
        for (int group : {1, 2, 3, 4}) {
            for (int t : {1, 17, 512, 1000, 5000}) {
                for (int tile : {16, 32, 64}) {
                    if (t > 17 && (tile + t + d + group) % 3 != 0) continue;  // a third of the long cases
                    const SparseCase c{2, group, d, t, tile, 40};
                    SCOPED_TRACE(c.name("sparse_decode"));
                    const auto in = reference::random_inputs(2 * group, 2, d, 1, t, 71);
                    // The decode selection of each KV head: tiles strictly before the query's tile.
                    const TileSelection sel = random_selection(3, t, tile, c.max_k, 72);
                    const int qt = (t - 1) / tile;
                    std::vector<int32_t> tiles, count;
                    for (int h = 0; h < 3; ++h) {
                        count.push_back(sel.size(h, qt));
                        tiles.insert(tiles.end(), sel.list(h, qt), sel.list(h, qt) + sel.max_k);
                    }
                    const int32_t head_map[2] = {2, 0};
                    const std::vector<double> ref =
                        reference::sparse_decode(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), tiles.data(),
                                                 count.data(), sel.max_k, head_map);
                    std::vector<float> out(in.q.size());
                    attn_sparse_decode(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), tiles.data(),
                                       count.data(), sel.max_k, head_map, out.data());
                    EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
                }
            }
        }
    }
}

TEST(SparseAttention, DecodeWithEveryTileEqualsDense) {
    for (int t : {1, 16, 17, 1000, 4097}) {
        SCOPED_TRACE("sparse_decode_all(T=" + std::to_string(t) + ",hq=8,hkv=2,d=64,tile=16)");
        const auto in = reference::random_inputs(8, 2, 64, 1, t, 81);
        const int n_before = (t - 1) / 16;
        std::vector<int32_t> tiles, count(2, n_before);
        for (int h = 0; h < 2; ++h)
            for (int x = 0; x < std::max(1, n_before); ++x) tiles.push_back(x);
        const std::vector<double> ref = reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
        std::vector<float> out(in.q.size());
        attn_sparse_decode(in.shape, 16, in.q.data(), in.k.data(), in.v.data(), tiles.data(), count.data(),
                           std::max(1, n_before), nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
    }
}

// Windowed layers: the random selections ignore the window on purpose (as an anchor with another window may hand a
// reuse layer tiles outside its own), so keys outside the row's window sit in selected and diagonal tiles alike.
TEST(SparseAttention, PrefillWithWindowMatchesMaskedReference) {
    for (int d : {64, 128}) {
        for (int group : {1, 4}) {
            for (int t : {1, 31, 33, 129, 300}) {
                for (int w : {1, 7, 33, 100}) {
                    if (w >= t || (t == 300 && d == 128)) continue;
                    const int tile = (t + w) % 2 == 0 ? 16 : 32;
                    const SparseCase c{2, group, d, t, tile, 6};
                    SCOPED_TRACE(c.name("sparse_prefill_window") + " window=" + std::to_string(w));
                    auto in = reference::random_inputs(2 * group, 2, d, t, t, 55);
                    in.shape.window = w;
                    const TileSelection own = random_selection(2, t, tile, c.max_k, 56);
                    const TileSelection anchor = random_selection(3, t, tile, -1, 57);  // every tile
                    const int32_t head_map[2] = {2, 0};
                    for (const auto& [sel, map] : {std::pair{&own, static_cast<const int32_t*>(nullptr)},
                                                   std::pair{&anchor, static_cast<const int32_t*>(head_map)}}) {
                        SCOPED_TRACE(map ? "head_map, every tile" : "own selection");
                        const std::vector<double> ref =
                            reference::sparse_prefill(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), *sel, map);
                        std::vector<float> out(in.q.size());
                        attn_sparse_prefill(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), *sel, map,
                                            out.data());
                        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
                    }
                }
            }
        }
    }
}

TEST(SparseAttention, PrefillWithWindowAndEveryTileEqualsDenseWindowed) {
    for (const auto& [t, w] : {std::pair{129, 33}, std::pair{300, 7}, std::pair{333, 100}}) {
        SCOPED_TRACE("sparse_prefill_all_window(T=" + std::to_string(t) + ",window=" + std::to_string(w) + ")");
        auto in = reference::random_inputs(6, 2, 64, t, t, 63);
        in.shape.window = w;
        const TileSelection all = random_selection(2, t, 16, -1, 0);
        std::vector<float> sparse(in.q.size()), dense(in.q.size());
        attn_sparse_prefill(in.shape, 16, in.q.data(), in.k.data(), in.v.data(), all, nullptr, sparse.data());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), dense.data());
        EXPECT_LT(reference::max_abs_diff(sparse.data(), dense.data(), sparse.size()), kAttentionTolerance);
    }
}

TEST(SparseAttention, DecodeWithWindowMatchesMaskedReference) {
    for (int d : {64, 128}) {
        for (int group : {1, 4}) {
            for (int t : {1, 31, 33, 129, 1000, 5000}) {
                for (int w : {1, 7, 100, 1500}) {
                    if (w >= t) continue;
                    const int tile = (t + w + d) % 3 == 0 ? 32 : 16;
                    const SparseCase c{2, group, d, t, tile, 40};
                    SCOPED_TRACE(c.name("sparse_decode_window") + " window=" + std::to_string(w));
                    auto in = reference::random_inputs(2 * group, 2, d, 1, t, 73);
                    in.shape.window = w;
                    // Tiles anywhere before the query's tile, inside the window or not; half the heads take all.
                    const TileSelection some = random_selection(3, t, tile, c.max_k, 74);
                    const TileSelection all = random_selection(3, t, tile, -1, 0);
                    const int qt = (t - 1) / tile;
                    const int max_k = std::max(some.max_k, all.max_k);
                    std::vector<int32_t> tiles(3 * std::max(1, max_k)), count;
                    for (int h = 0; h < 3; ++h) {
                        const TileSelection& sel = h == 1 ? all : some;
                        count.push_back(sel.size(h, qt));
                        std::copy(sel.list(h, qt), sel.list(h, qt) + sel.size(h, qt), tiles.begin() + h * max_k);
                    }
                    const int32_t head_map[2] = {2, 1};
                    const std::vector<double> ref =
                        reference::sparse_decode(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), tiles.data(),
                                                 count.data(), max_k, head_map);
                    std::vector<float> out(in.q.size());
                    attn_sparse_decode(in.shape, tile, in.q.data(), in.k.data(), in.v.data(), tiles.data(),
                                       count.data(), max_k, head_map, out.data());
                    EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
                }
            }
        }
    }
}

TEST(SparseAttention, WindowCoveringEveryKeyEqualsNoWindow) {
    for (int t : {1, 31, 33, 129, 300}) {
        SCOPED_TRACE("sparse_window_covering(T=" + std::to_string(t) + ")");
        auto in = reference::random_inputs(8, 2, 64, t, t, 83);
        auto dec = reference::random_inputs(8, 2, 64, 1, t, 84);
        const TileSelection sel = random_selection(2, t, 16, 5, 85);
        const int qt = (t - 1) / 16;
        std::vector<int32_t> tiles(2 * std::max(1, sel.max_k)), count;
        for (int h = 0; h < 2; ++h) {
            count.push_back(sel.size(h, qt));
            std::copy(sel.list(h, qt), sel.list(h, qt) + sel.size(h, qt), tiles.begin() + h * std::max(1, sel.max_k));
        }
        const auto run = [&](std::vector<float>& p, std::vector<float>& d) {
            attn_sparse_prefill(in.shape, 16, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, p.data());
            attn_sparse_decode(dec.shape, 16, dec.q.data(), dec.k.data(), dec.v.data(), tiles.data(), count.data(),
                               std::max(1, sel.max_k), nullptr, d.data());
        };
        std::vector<float> p0(in.q.size()), d0(dec.q.size());
        run(p0, d0);
        for (int w : {t, t + 3}) {
            in.shape.window = dec.shape.window = w;
            std::vector<float> p(in.q.size()), d(dec.q.size());
            run(p, d);
            EXPECT_EQ(p, p0) << "window " << w;
            EXPECT_EQ(d, d0) << "window " << w;
        }
    }
}

TEST(SparseAttention, ThreadCountDoesNotChangeResults) {
    const auto in = reference::random_inputs(8, 2, 64, 600, 600, 91);
    const auto dec = reference::random_inputs(8, 2, 64, 1, 20000, 92);
    const TileSelection sel = random_selection(2, 600, 32, 10, 93);
    const TileSelection dsel = random_selection(2, 20000, 16, 300, 94);
    const int qt = (20000 - 1) / 16;
    std::vector<int32_t> tiles, count;
    for (int h = 0; h < 2; ++h) {
        count.push_back(dsel.size(h, qt));
        tiles.insert(tiles.end(), dsel.list(h, qt), dsel.list(h, qt) + dsel.max_k);
    }
    const int saved = omp_get_max_threads();
    std::vector<float> p1(in.q.size()), p2(in.q.size()), d1(dec.q.size()), d2(dec.q.size());
    omp_set_num_threads(1);
    attn_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, p1.data());
    attn_sparse_decode(dec.shape, 16, dec.q.data(), dec.k.data(), dec.v.data(), tiles.data(), count.data(), dsel.max_k,
                       nullptr, d1.data());
    omp_set_num_threads(2);
    attn_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, p2.data());
    attn_sparse_decode(dec.shape, 16, dec.q.data(), dec.k.data(), dec.v.data(), tiles.data(), count.data(), dsel.max_k,
                       nullptr, d2.data());
    omp_set_num_threads(saved);
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(d1, d2);
}

TEST(SparseAttention, ThreadCountDoesNotChangeWindowedResults) {
    auto in = reference::random_inputs(8, 2, 64, 600, 600, 95);
    auto dec = reference::random_inputs(8, 2, 64, 1, 20000, 96);
    in.shape.window = 100;
    dec.shape.window = 4000;
    const TileSelection sel = random_selection(2, 600, 32, 10, 97);
    const TileSelection dsel = random_selection(2, 20000, 16, 600, 98);
    const int qt = (20000 - 1) / 16;
    std::vector<int32_t> tiles, count;
    for (int h = 0; h < 2; ++h) {
        count.push_back(dsel.size(h, qt));
        tiles.insert(tiles.end(), dsel.list(h, qt), dsel.list(h, qt) + dsel.max_k);
    }
    const int saved = omp_get_max_threads();
    std::vector<float> p1(in.q.size()), p2(in.q.size()), d1(dec.q.size()), d2(dec.q.size());
    omp_set_num_threads(1);
    attn_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, p1.data());
    attn_sparse_decode(dec.shape, 16, dec.q.data(), dec.k.data(), dec.v.data(), tiles.data(), count.data(), dsel.max_k,
                       nullptr, d1.data());
    omp_set_num_threads(2);
    attn_sparse_prefill(in.shape, 32, in.q.data(), in.k.data(), in.v.data(), sel, nullptr, p2.data());
    attn_sparse_decode(dec.shape, 16, dec.q.data(), dec.k.data(), dec.v.data(), tiles.data(), count.data(), dsel.max_k,
                       nullptr, d2.data());
    omp_set_num_threads(saved);
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(d1, d2);
}

}  // namespace
}  // namespace kascade
