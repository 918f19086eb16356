// tests/kernels/test_bf16_kv.cpp: every attention kernel reading a BF16 KV cache (KvPtr::bf16) against the
// double-precision reference evaluated on the same keys and values rounded to BF16: the kernels may round nothing
// else, so the fp32 tolerance holds unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/bf16.h"
#include "common/attention_tolerance.h"
#include "kernels/decode_head_scores.h"
#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "kernels/quest.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/sparse_attention.h"
#include "kernels/tile_mass.h"

namespace kascade {
namespace {

/// Random inputs whose K and V are BF16: `in` holds them as (exactly representable) floats for the reference, k16
/// and v16 their BF16 bits for the kernels. The rows past n_k stay NaN, as in reference::random_inputs.
struct Bf16Inputs {
    reference::AttnInputs in;
    std::vector<uint16_t> k16, v16;

    KvPtr k() const { return KvPtr::bf16(k16.data()); }
    KvPtr v() const { return KvPtr::bf16(v16.data()); }
};

Bf16Inputs bf16_inputs(int n_q_heads, int n_kv_heads, int head_dim, int n_q, int n_k, int window, uint64_t seed) {
    Bf16Inputs r{reference::random_inputs(n_q_heads, n_kv_heads, head_dim, n_q, n_k, seed), {}, {}};
    r.in.shape.window = window;
    for (auto [floats, bits] : {std::pair{&r.in.k, &r.k16}, std::pair{&r.in.v, &r.v16}}) {
        bits->resize(floats->size());
        for (size_t i = 0; i < floats->size(); ++i) {
            (*bits)[i] = bf16_from_float((*floats)[i]);
            (*floats)[i] = float_from_bf16((*bits)[i]);
        }
    }
    return r;
}

/// Every other key tile before each query tile (a sparse selection that is neither empty nor everything).
TileSelection every_other_tile(int n_kv_heads, int n_q, int tile) {
    TileSelection sel;
    sel.n_kv_heads = n_kv_heads;
    sel.n_q_tiles = tile_count(n_q, tile);
    sel.tile = tile;
    sel.max_k = std::max(1, sel.n_q_tiles / 2);
    sel.count.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles, 0);
    sel.tiles.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);
    for (int h = 0; h < n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            int n = 0;
            for (int x = h % 2; x < qt; x += 2) sel.list(h, qt)[n++] = x;
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = n;
        }
    }
    return sel;
}

/// Every step-th key before each query tile, from key h % step of KV head h (step 1: every key before the tile).
TokenSelection every_nth_key(int step, int n_kv_heads, int n_q, int tile) {
    TokenSelection sel;
    sel.n_kv_heads = n_kv_heads;
    sel.n_q_tiles = tile_count(n_q, tile);
    sel.tile = tile;
    sel.max_k = std::max(1, n_q / step + 1);
    sel.count.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles, 0);
    sel.keys.assign(static_cast<size_t>(n_kv_heads) * sel.n_q_tiles * sel.max_k, 0);
    for (int h = 0; h < n_kv_heads; ++h) {
        for (int qt = 0; qt < sel.n_q_tiles; ++qt) {
            int n = 0;
            for (int j = h % step; j < qt * tile; j += step) sel.list(h, qt)[n++] = j;
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = n;
        }
    }
    return sel;
}

/// The decode selection of query tile qt: per KV head its list (max_k entries each) and count, as the decode kernels
/// take them.
struct DecodeLists {
    std::vector<int32_t> list, count;
    int max_k = 0;

    /// The same as a decode anchor's selection (one query tile): a TokenSelection's keys or a TileSelection's tiles.
    template <class Selection>
    Selection as(int n_kv_heads, int tile, std::vector<int32_t> Selection::*entries) const {
        Selection sel;
        sel.n_kv_heads = n_kv_heads;
        sel.n_q_tiles = 1;
        sel.max_k = max_k;
        sel.tile = tile;
        sel.count = count;
        sel.*entries = list;
        return sel;
    }
};
template <typename Selection>
DecodeLists decode_lists(const Selection& sel, int n_kv_heads, int qt) {
    DecodeLists r;
    r.max_k = sel.max_k;
    for (int h = 0; h < n_kv_heads; ++h) {
        r.count.push_back(sel.size(h, qt));
        r.list.insert(r.list.end(), sel.list(h, qt), sel.list(h, qt) + sel.max_k);
    }
    return r;
}

struct Case {
    int n_kv_heads, group, head_dim, n, window;
    std::string name() const {
        return "hkv=" + std::to_string(n_kv_heads) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",d=" + std::to_string(head_dim) + ",T=" + std::to_string(n) + ",window=" + std::to_string(window);
    }
};

// Lengths across the prefill key blocks (64) and the decode pieces (256 and 1024 keys), GQA 1 and 4, with and
// without a sliding window.
constexpr Case kPrefillCases[] = {{2, 1, 64, 17, 0}, {1, 4, 128, 300, 0}, {2, 2, 64, 200, 50}, {1, 3, 8, 129, 0}};
// Groups of 7 and 8 split into chunks of four heads in the value kernel; head_dim 72 is no whole number of 16-lane
// registers (no 4 x 4 score kernel; a 64- and an 8-column value chunk). With AVX-512, exact products split the BF16
// rows into even and odd values where head_dim % 32 == 0: a group of 3 at 96 takes that split's 3 x 2 and 3 x 1
// kernels, and 9 heads of 256 (more query values than kMaxSplitQueries) the widening kernels instead.
constexpr Case kDecodeCases[] = {{2, 1, 64, 17, 0},  {1, 4, 128, 1500, 0}, {2, 2, 64, 2100, 700}, {2, 4, 128, 300, 0},
                                 {1, 7, 72, 300, 0}, {1, 8, 64, 500, 0},   {1, 3, 96, 301, 0},    {1, 9, 256, 130, 0}};

TEST(Bf16Kv, DensePrefillAndLseMatchTheRoundedReference) {
    for (const Case& c : kPrefillCases) {
        SCOPED_TRACE(c.name());
        const Bf16Inputs x = bf16_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.n, c.n, c.window, 5);
        std::vector<double> ref_lse;
        const std::vector<double> ref =
            reference::dense_attention(x.in.shape, x.in.q.data(), x.in.k.data(), x.in.v.data(), &ref_lse);
        std::vector<float> out(x.in.q.size()), lse(ref_lse.size());
        attn_dense_prefill(x.in.shape, x.in.q.data(), x.k(), x.v(), out.data(), lse.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(lse.data(), ref_lse.data(), lse.size()), kAttentionTolerance);
    }
}

TEST(Bf16Kv, SparsePrefillOverTilesAndKeysMatchesTheRoundedReference) {
    for (const Case& c : kPrefillCases) {
        SCOPED_TRACE(c.name());
        const int tile = 16;
        const Bf16Inputs x = bf16_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.n, c.n, c.window, 7);
        const float* q = x.in.q.data();
        std::vector<float> out(x.in.q.size());

        const TileSelection tiles = every_other_tile(c.n_kv_heads, c.n, tile);
        const std::vector<double> ref_tiles =
            reference::sparse_prefill(x.in.shape, tile, q, x.in.k.data(), x.in.v.data(), tiles, nullptr);
        attn_sparse_prefill(x.in.shape, tile, q, x.k(), x.v(), tiles, nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kAttentionTolerance);

        const TokenSelection keys = every_nth_key(3, c.n_kv_heads, c.n, tile);
        const std::vector<double> ref_keys =
            reference::token_sparse_prefill(x.in.shape, tile, q, x.in.k.data(), x.in.v.data(), keys, nullptr);
        attn_token_sparse_prefill(x.in.shape, tile, q, x.k(), x.v(), keys, nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kAttentionTolerance);
    }
}

TEST(Bf16Kv, PrefillMassMatchesTheRoundedReference) {
    for (const Case& c : kPrefillCases) {
        if (c.window > 0) continue;  // the windowed pooling is the fp32 suite's; here the K reads are what changes
        SCOPED_TRACE(c.name());
        const int tile = 16;
        const Bf16Inputs x = bf16_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.n, c.n, 0, 9);
        const float* q = x.in.q.data();
        std::vector<float> out(x.in.q.size());
        TileMass mass;
        attn_dense_prefill_with_mass(x.in.shape, tile, q, x.k(), x.v(), out.data(), &mass);
        const std::vector<double> ref_out = reference::dense_attention(x.in.shape, q, x.in.k.data(), x.in.v.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_out.data(), out.size()), kAttentionTolerance);
        const std::vector<double> ref_mass = reference::tile_mass_post_softmax(x.in.shape, tile, q, x.in.k.data());
        EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref_mass.data(), ref_mass.size()), kAttentionTolerance);

        TokenMass tokens;
        attn_token_mass(x.in.shape, tile, q, x.k(), &tokens, nullptr);
        const std::vector<double> ref_tokens = reference::token_mass_post_softmax(x.in.shape, tile, q, x.in.k.data());
        EXPECT_LT(reference::max_abs_diff(tokens.mass.data(), ref_tokens.data(), ref_tokens.size()),
                  kAttentionTolerance);
    }
}

TEST(Bf16Kv, DecodeKernelsMatchTheRoundedReference) {
    DecodeScoringScratch scratch;
    for (const Case& c : kDecodeCases) {
        SCOPED_TRACE(c.name());
        const int tile = 32;
        const Bf16Inputs x = bf16_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, 1, c.n, c.window, 11);
        const AttnShape& s = x.in.shape;
        const float* q = x.in.q.data();
        const float* k = x.in.k.data();
        const float* v = x.in.v.data();
        std::vector<float> out(x.in.q.size());

        const std::vector<double> ref_dense = reference::dense_attention(s, q, k, v);
        attn_dense_decode(s, q, x.k(), x.v(), out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_dense.data(), out.size()), kAttentionTolerance);

        // The decode selection: the query tile's row of a prefill selection, per KV head.
        const TileSelection tiles = every_other_tile(c.n_kv_heads, c.n, tile);
        const int qt = (c.n - 1) / tile;
        const DecodeLists tile_lists = decode_lists(tiles, c.n_kv_heads, qt);
        const std::vector<double> ref_tiles = reference::sparse_decode(
            s, tile, q, k, v, tile_lists.list.data(), tile_lists.count.data(), tile_lists.max_k, nullptr);
        attn_sparse_decode(s, tile, q, x.k(), x.v(), tile_lists.list.data(), tile_lists.count.data(), tile_lists.max_k,
                           nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kAttentionTolerance);

        const TokenSelection keys = every_nth_key(3, c.n_kv_heads, c.n, tile);
        const DecodeLists key_lists = decode_lists(keys, c.n_kv_heads, qt);
        // The same lists as a decode anchor's selections.
        const TokenSelection anchor_keys = key_lists.as(c.n_kv_heads, tile, &TokenSelection::keys);
        const TileSelection anchor_tiles = tile_lists.as(c.n_kv_heads, tile, &TileSelection::tiles);
        const std::vector<double> ref_keys = reference::token_sparse_decode(
            s, tile, q, k, v, key_lists.list.data(), key_lists.count.data(), key_lists.max_k, nullptr);
        attn_token_sparse_decode(s, tile, q, x.k(), x.v(), key_lists.list.data(), key_lists.count.data(),
                                 key_lists.max_k, nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kAttentionTolerance);

        // The anchor signal and the fused dense decode + mass of a decode anchor layer.
        TokenMass mass;
        decode_token_mass(s, tile, q, x.k(), Pooling::PostSoftmax, &scratch, &mass);
        const std::vector<double> ref_mass = reference::decode_token_mass(s, tile, q, k, false);
        EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref_mass.data(), ref_mass.size()), kAttentionTolerance);
        // A decode anchor's attention over its selection from the scores the mass was pooled from.
        std::fill(out.begin(), out.end(), 0.0f);
        attn_token_sparse_decode_scored(s, tile, scratch, x.v(), anchor_keys, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kAttentionTolerance);
        // The same after a pre-softmax pass (scores in natural units), and a tile-granularity anchor's.
        decode_token_mass(s, tile, q, x.k(), Pooling::PreSoftmax, &scratch, &mass);
        std::fill(out.begin(), out.end(), 0.0f);
        attn_token_sparse_decode_scored(s, tile, scratch, x.v(), anchor_keys, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kAttentionTolerance);
        TileMass tile_mass;
        decode_tile_mass(s, tile, q, x.k(), Pooling::PostSoftmax, &scratch, &tile_mass);
        std::fill(out.begin(), out.end(), 0.0f);
        attn_sparse_decode_scored(s, tile, scratch, x.v(), anchor_tiles, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kAttentionTolerance);
        std::fill(out.begin(), out.end(), 0.0f);
        attn_dense_decode_with_token_mass(s, tile, q, x.k(), x.v(), out.data(), &scratch, &mass);
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_dense.data(), out.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref_mass.data(), ref_mass.size()), kAttentionTolerance);

        // Per-head probabilities (OmniKV's and LessIsMore's selection signal): p_j = exp(scaled score_j - lse), with
        // the reference's log-sum-exp, 0 outside the window.
        std::vector<float> probabilities(static_cast<size_t>(s.n_q_heads) * s.n_k);
        decode_head_probabilities(s, q, x.k(), probabilities.data());
        std::vector<double> lse;
        reference::dense_attention(s, q, k, v, &lse);
        const int first = c.window > 0 ? std::max(0, s.n_k - c.window) : 0;
        for (int h = 0; h < s.n_q_heads; ++h) {
            const float* kh = k + static_cast<size_t>(h / s.group_size()) * s.kv_stride * s.head_dim;
            std::vector<double> ref_p(s.n_k, 0.0);
            for (int j = first; j < s.n_k; ++j) {
                double dot = 0;
                for (int i = 0; i < s.head_dim; ++i)
                    dot += static_cast<double>(q[h * s.head_dim + i]) * kh[static_cast<size_t>(j) * s.head_dim + i];
                ref_p[j] = std::exp(dot * s.scale - lse[h]);
            }
            EXPECT_LT(
                reference::max_abs_diff(probabilities.data() + static_cast<size_t>(h) * s.n_k, ref_p.data(), s.n_k),
                kAttentionTolerance)
                << "head " << h;
        }
    }
}

/// The queries a BF16-products decode multiplies: each prescaled query element (scale * log2 e, as the kernels
/// prescale) rounded to BF16, then scaled back for the reference.
std::vector<float> bf16_rounded_queries(const AttnShape& s, const std::vector<float>& q) {
    const double prescale = static_cast<double>(s.scale * 1.4426950408889634f);
    std::vector<float> r(q.size());
    for (size_t i = 0; i < q.size(); ++i)
        r[i] = static_cast<float>(float_from_bf16(bf16_from_float(static_cast<float>(q[i] * prescale))) / prescale);
    return r;
}

// --matmul bf16 over a BF16 cache: the decode kernels round the prescaled query and the softmax weights to BF16 (BF16
// dot products where the CPU has AVX512-BF16). Against the reference on the rounded queries, the scores (and so the
// anchor's mass) differ only by fp32 sums: products of two BF16 values are exact in fp32. The outputs also carry
// the weights' rounding, at most 2^-9 of each weight, and sum to a weighted mean of rows in [-1, 1].
TEST(Bf16Kv, Bf16ProductsDecodeMatchesTheReferenceOnRoundedQueries) {
    constexpr double kRoundedWeightsTolerance = 4e-3;
    // {1, 4, 64, 1503}: GQA 4 whose last decode piece (223 keys) and last scoring piece (479) end in three keys after
    // the 4 x 4 blocks, so the 4 x 2 and 4 x 1 kernels run after them.
    constexpr Case kCases[] = {
        {1, 4, 128, 1500, 0}, {2, 2, 64, 2100, 700}, {1, 3, 64, 301, 0}, {1, 7, 64, 257, 0}, {1, 4, 64, 1503, 0}};
    DecodeScoringScratch scratch;
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.name());
        const int tile = 32;
        Bf16Inputs x = bf16_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, 1, c.n, c.window, 17);
        x.in.shape.products = MatmulPrecision::Bf16;
        const AttnShape& s = x.in.shape;
        const float* q = x.in.q.data();
        const std::vector<float> q_rounded = bf16_rounded_queries(s, x.in.q);
        const float* k = x.in.k.data();
        const float* v = x.in.v.data();
        std::vector<float> out(x.in.q.size());

        const std::vector<double> ref_dense = reference::dense_attention(s, q_rounded.data(), k, v);
        attn_dense_decode(s, q, x.k(), x.v(), out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_dense.data(), out.size()), kRoundedWeightsTolerance);
        // Not the exact products' result: the rounding happened (the widest rounding error of a query is 2^-9 of it).
        EXPECT_GT(reference::max_abs_diff(out.data(), reference::dense_attention(s, q, k, v).data(), out.size()),
                  kAttentionTolerance);

        const int qt = (c.n - 1) / tile;
        const TileSelection tiles = every_other_tile(c.n_kv_heads, c.n, tile);
        const DecodeLists tile_lists = decode_lists(tiles, c.n_kv_heads, qt);
        const std::vector<double> ref_tiles =
            reference::sparse_decode(s, tile, q_rounded.data(), k, v, tile_lists.list.data(), tile_lists.count.data(),
                                     tile_lists.max_k, nullptr);
        attn_sparse_decode(s, tile, q, x.k(), x.v(), tile_lists.list.data(), tile_lists.count.data(), tile_lists.max_k,
                           nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kRoundedWeightsTolerance);

        const TokenSelection keys = every_nth_key(3, c.n_kv_heads, c.n, tile);
        const DecodeLists key_lists = decode_lists(keys, c.n_kv_heads, qt);
        // The same lists as a decode anchor's selections.
        const TokenSelection anchor_keys = key_lists.as(c.n_kv_heads, tile, &TokenSelection::keys);
        const TileSelection anchor_tiles = tile_lists.as(c.n_kv_heads, tile, &TileSelection::tiles);
        const std::vector<double> ref_keys = reference::token_sparse_decode(
            s, tile, q_rounded.data(), k, v, key_lists.list.data(), key_lists.count.data(), key_lists.max_k, nullptr);
        attn_token_sparse_decode(s, tile, q, x.k(), x.v(), key_lists.list.data(), key_lists.count.data(),
                                 key_lists.max_k, nullptr, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kRoundedWeightsTolerance);

        TokenMass mass;
        decode_token_mass(s, tile, q, x.k(), Pooling::PostSoftmax, &scratch, &mass);
        const std::vector<double> ref_mass = reference::decode_token_mass(s, tile, q_rounded.data(), k, false);
        EXPECT_LT(reference::max_abs_diff(mass.mass.data(), ref_mass.data(), ref_mass.size()), kAttentionTolerance);
        attn_token_sparse_decode_scored(s, tile, scratch, x.v(), anchor_keys, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kRoundedWeightsTolerance);
        decode_token_mass(s, tile, q, x.k(), Pooling::PreSoftmax, &scratch, &mass);
        attn_token_sparse_decode_scored(s, tile, scratch, x.v(), anchor_keys, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_keys.data(), out.size()), kRoundedWeightsTolerance);
        TileMass tile_mass;
        decode_tile_mass(s, tile, q, x.k(), Pooling::PostSoftmax, &scratch, &tile_mass);
        attn_sparse_decode_scored(s, tile, scratch, x.v(), anchor_tiles, out.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_tiles.data(), out.size()), kRoundedWeightsTolerance);

        // The fused dense decode + mass of a layer that feeds reuse layers: its mass from the exact weights, its
        // output from the rounded ones (as attn_dense_decode's, though rounded per piece of its own length).
        TokenMass fused_mass;
        attn_dense_decode_with_token_mass(s, tile, q, x.k(), x.v(), out.data(), &scratch, &fused_mass);
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_dense.data(), out.size()), kRoundedWeightsTolerance);
        EXPECT_LT(reference::max_abs_diff(fused_mass.mass.data(), ref_mass.data(), ref_mass.size()),
                  kAttentionTolerance);
        TileMass fused_tiles;
        attn_dense_decode_with_tile_mass(s, tile, q, x.k(), x.v(), out.data(), &scratch, &fused_tiles);
        EXPECT_LT(reference::max_abs_diff(out.data(), ref_dense.data(), out.size()), kRoundedWeightsTolerance);
    }
}

// The softmax weights' BF16 rounding under --matmul bf16, by hand: one query head whose prescaled query is (1, 0, ..)
// (exactly 1 after its BF16 rounding), 35 keys alternating between (0, 0, ..) with value rows of 0 and (-63/64, 0, ..)
// with value rows of 1. The scores in the exp2 domain are 0 and -63/64, so the weights are 1 and w = 2^(-63/64) =
// 0.505444.., whose BF16 value is 0.50390625 (0.11 of its spacing from a rounding boundary: the vector exp2's error
// cannot move it), and every output element is 17 w / (18 + 17 w): 0.323119.. with the exact weights, 0.322453.. with
// the rounded ones. 35 keys take whole vectors and a tail in exp2_from_max at 8 and 16 lanes. Products of BF16 values
// and these sums are exact in fp32, so only the final division rounds.
TEST(Bf16Kv, Bf16ProductsRoundTheSoftmaxWeightsByHand) {
    constexpr int kKeys = 35, kDim = 64, kTile = 32;
    Bf16Inputs x = bf16_inputs(1, 1, kDim, 1, kKeys, 0, 19);
    AttnShape& s = x.in.shape;
    const float prescale = s.scale * 1.4426950408889634f;
    std::fill(x.in.q.begin(), x.in.q.end(), 0.0f);
    x.in.q[0] = 1.0f / prescale;
    for (int j = 0; j < kKeys; ++j) {
        const bool reduced = j % 2 == 1;
        for (int p = 0; p < kDim; ++p) {
            const size_t at = static_cast<size_t>(j) * kDim + p;
            x.k16[at] = bf16_from_float(p == 0 && reduced ? -63.0f / 64.0f : 0.0f);
            x.v16[at] = bf16_from_float(reduced ? 1.0f : 0.0f);
            x.in.k[at] = float_from_bf16(x.k16[at]);  // unread here, but kept equal to the bits as everywhere else
            x.in.v[at] = float_from_bf16(x.v16[at]);
        }
    }
    const auto mean_of = [](double w) { return 17.0 * w / (18.0 + 17.0 * w); };
    const double exact = mean_of(std::exp2(-63.0 / 64.0));
    const double rounded = mean_of(0.50390625);
    ASSERT_GT(exact - rounded, 30 * kAttentionTolerance);  // the test can tell the two apart

    // Every key before the query's tile listed (the kernels add the query's own tile): all 35 keys.
    const DecodeLists all = decode_lists(every_nth_key(1, 1, kKeys, kTile), 1, (kKeys - 1) / kTile);
    const TokenSelection anchor = all.as(1, kTile, &TokenSelection::keys);

    DecodeScoringScratch scratch;
    TokenMass mass;
    std::vector<float> out(kDim);
    const auto expect_every_element = [&](double want, const char* kernel) {
        for (int p = 0; p < kDim; ++p) EXPECT_NEAR(out[p], want, 1e-6) << kernel << ", element " << p;
    };
    for (MatmulPrecision products : {MatmulPrecision::Exact, MatmulPrecision::Bf16}) {
        s.products = products;
        const double want = products == MatmulPrecision::Bf16 ? rounded : exact;
        SCOPED_TRACE(products == MatmulPrecision::Bf16 ? "bf16 products" : "exact products");
        attn_dense_decode(s, x.in.q.data(), x.k(), x.v(), out.data());
        expect_every_element(want, "attn_dense_decode");
        attn_token_sparse_decode(s, kTile, x.in.q.data(), x.k(), x.v(), all.list.data(), all.count.data(), all.max_k,
                                 nullptr, out.data());
        expect_every_element(want, "attn_token_sparse_decode");
        // A decode anchor: its scoring pass keeps the exact weights for the mass, its value pass rounds its own.
        decode_token_mass(s, kTile, x.in.q.data(), x.k(), Pooling::PostSoftmax, &scratch, &mass);
        attn_token_sparse_decode_scored(s, kTile, scratch, x.v(), anchor, out.data());
        expect_every_element(want, "attn_token_sparse_decode_scored");
        attn_dense_decode_with_token_mass(s, kTile, x.in.q.data(), x.k(), x.v(), out.data(), &scratch, &mass);
        expect_every_element(want, "attn_dense_decode_with_token_mass");
    }
}

TEST(Bf16Kv, QuestPageBoundsAreThoseOfTheRoundedKeys) {
    const Bf16Inputs x = bf16_inputs(4, 2, 64, 1, 100, 0, 13);
    const int page = 16;
    for (int h = 0; h < 2; ++h) {
        const std::vector<float> lo = reference::page_min(x.in.shape, x.in.k.data(), h, page);
        const std::vector<float> hi = reference::page_max(x.in.shape, x.in.k.data(), h, page);
        for (int p = 0; p * page < 100; ++p) {
            const int n = std::min(page, 100 - p * page);
            std::vector<float> min(64), max(64);
            key_page_bounds_add(x.k() + (static_cast<int64_t>(h) * x.in.shape.kv_stride + p * page) * 64, n, 64, true,
                                min.data(), max.data());
            EXPECT_TRUE(std::equal(min.begin(), min.end(), lo.begin() + p * 64)) << "head " << h << " page " << p;
            EXPECT_TRUE(std::equal(max.begin(), max.end(), hi.begin() + p * 64)) << "head " << h << " page " << p;
        }
    }
}

}  // namespace
}  // namespace kascade
