// tests/kernels/test_dense_attention.cpp: dense causal prefill, LSE and decode against the double-precision
// reference (kernels/reference), over head sizes, GQA ratios, lengths, sliding windows and thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "common/attention_tolerance.h"
#include "kernels/dense_attention.h"
#include "kernels/reference/attention_reference.h"

namespace kascade {
namespace {

struct DenseCase {
    int n_kv_heads, group, head_dim, n_q, n_k;
    std::string name() const {
        return "dense(hkv=" + std::to_string(n_kv_heads) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",d=" + std::to_string(head_dim) + ",n_q=" + std::to_string(n_q) + ",n_k=" + std::to_string(n_k) + ")";
    }
};

// Full grid at short lengths, a spread of d and GQA ratios at T = 512 and 1000 (the reference is O(T^2), and the
// suite must stay fast under sanitizers).
std::vector<DenseCase> prefill_cases() {
    std::vector<DenseCase> cases;
    for (int d : {8, 64, 128})
        for (int group : {1, 2, 3, 4})
            for (int t : {1, 17}) cases.push_back({2, group, d, t, t});
    cases.push_back({1, 1, 64, 512, 512});
    cases.push_back({1, 4, 128, 512, 512});
    cases.push_back({1, 3, 8, 512, 512});
    cases.push_back({1, 2, 64, 1000, 1000});
    cases.push_back({1, 1, 128, 1000, 1000});
    cases.push_back({2, 2, 64, 37, 100});  // chunked prefill: the queries are the last 37 of 100 positions
    cases.push_back({1, 3, 8, 1, 77});
    return cases;
}

TEST(DenseAttention, PrefillMatchesReference) {
    for (const DenseCase& c : prefill_cases()) {
        SCOPED_TRACE(c.name());
        const auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.n_q, c.n_k, 11);
        std::vector<double> ref_lse;
        const std::vector<double> ref =
            reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data(), &ref_lse);
        std::vector<float> out(in.q.size()), lse(ref_lse.size());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(lse.data(), ref_lse.data(), lse.size()), kAttentionTolerance);
    }
}

TEST(DenseAttention, DecodeMatchesReference) {
    for (int d : {8, 64, 128}) {
        for (int group : {1, 2, 3, 4}) {
            // Long caches span many decode pieces; one GQA ratio per head size is enough for them.
            for (int t : {1, 17, 512, 1000, 4099}) {
                if (t > 512 && group != d % 5) continue;
                const DenseCase c{2, group, d, 1, t};
                SCOPED_TRACE(c.name());
                const auto in = reference::random_inputs(2 * group, 2, d, 1, t, 23);
                const std::vector<double> ref =
                    reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
                std::vector<float> out(in.q.size());
                attn_dense_decode(in.shape, in.q.data(), in.k.data(), in.v.data(), out.data());
                EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
            }
        }
    }
}

struct WindowCase {
    int n_kv_heads, group, head_dim, n_q, n_k, window;
    std::string name() const {
        return "dense_window(hkv=" + std::to_string(n_kv_heads) + ",hq=" + std::to_string(n_kv_heads * group) +
               ",d=" + std::to_string(head_dim) + ",n_q=" + std::to_string(n_q) + ",n_k=" + std::to_string(n_k) +
               ",window=" + std::to_string(window) + ")";
    }
};

// MHA and GQA at d = 64 and 128, odd lengths, windows of 1 key, below a tile, not a multiple of any tile or key
// block, and just below n. n = 300 with one KV head and MHA puts 128 query rows in a work item, so some rows see
// nothing of the first key block they visit (an all-masked online-softmax step).
std::vector<WindowCase> window_prefill_cases() {
    std::vector<WindowCase> cases;
    for (int d : {64, 128})
        for (int group : {1, 4})
            for (int t : {1, 31, 33, 129})
                for (int w : {1, 7, 33, 100})
                    if (w < t) cases.push_back({2, group, d, t, t, w});
    for (int w : {1, 10, 65, 299}) cases.push_back({1, 1, 64, 300, 300, w});
    cases.push_back({1, 3, 128, 300, 300, 77});
    cases.push_back({2, 2, 64, 37, 100, 20});  // chunked prefill: the queries are the last 37 of 100 positions
    cases.push_back({2, 2, 64, 37, 100, 50});
    return cases;
}

TEST(DenseAttention, PrefillWithWindowMatchesReference) {
    for (const WindowCase& c : window_prefill_cases()) {
        SCOPED_TRACE(c.name());
        auto in = reference::random_inputs(c.n_kv_heads * c.group, c.n_kv_heads, c.head_dim, c.n_q, c.n_k, 13);
        in.shape.window = c.window;
        std::vector<double> ref_lse;
        const std::vector<double> ref =
            reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data(), &ref_lse);
        std::vector<float> out(in.q.size()), lse(ref_lse.size());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
        EXPECT_LT(reference::max_abs_diff(lse.data(), ref_lse.data(), lse.size()), kAttentionTolerance);
    }
}

TEST(DenseAttention, DecodeWithWindowMatchesReference) {
    for (int d : {64, 128}) {
        for (int group : {1, 4}) {
            for (int t : {1, 31, 33, 129, 1000, 5000}) {
                for (int w : {1, 7, 100, 300, 4096}) {
                    if (w >= t) continue;
                    const WindowCase c{2, group, d, 1, t, w};
                    SCOPED_TRACE(c.name());
                    auto in = reference::random_inputs(2 * group, 2, d, 1, t, 29);
                    in.shape.window = w;
                    const std::vector<double> ref =
                        reference::dense_attention(in.shape, in.q.data(), in.k.data(), in.v.data());
                    std::vector<float> out(in.q.size());
                    attn_dense_decode(in.shape, in.q.data(), in.k.data(), in.v.data(), out.data());
                    EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kAttentionTolerance);
                }
            }
        }
    }
}

// A window that covers every key is no window: the very same operations, bit for bit.
TEST(DenseAttention, WindowCoveringEveryKeyEqualsNoWindow) {
    for (int t : {1, 31, 33, 129, 300}) {
        SCOPED_TRACE("dense_window_covering(T=" + std::to_string(t) + ")");
        auto in = reference::random_inputs(8, 2, 64, t, t, 17);
        auto dec = reference::random_inputs(8, 2, 64, 1, t, 18);
        std::vector<float> out0(in.q.size()), lse0(8 * t), dec0(dec.q.size());
        attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out0.data(), lse0.data());
        attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dec0.data());
        for (int w : {t, t + 1, 1 << 20}) {
            in.shape.window = dec.shape.window = w;
            std::vector<float> out(in.q.size()), lse(8 * t), dout(dec.q.size());
            attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data());
            attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dout.data());
            EXPECT_EQ(out, out0) << "window " << w;
            EXPECT_EQ(lse, lse0) << "window " << w;
            EXPECT_EQ(dout, dec0) << "window " << w;
        }
    }
}

// Work is split by shape only, so one and two threads must agree bit for bit.
TEST(DenseAttention, ThreadCountDoesNotChangeResults) {
    const int saved = omp_get_max_threads();
    const auto in = reference::random_inputs(6, 2, 64, 700, 700, 5);
    const auto dec = reference::random_inputs(6, 2, 64, 1, 5000, 6);
    std::vector<float> out1(in.q.size()), out2(in.q.size()), lse1(6 * 700), lse2(6 * 700);
    std::vector<float> dec1(dec.q.size()), dec2(dec.q.size());
    omp_set_num_threads(1);
    attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out1.data(), lse1.data());
    attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dec1.data());
    omp_set_num_threads(2);
    attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out2.data(), lse2.data());
    attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dec2.data());
    omp_set_num_threads(saved);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(lse1, lse2);
    EXPECT_EQ(dec1, dec2);
}

TEST(DenseAttention, ThreadCountDoesNotChangeWindowedResults) {
    const int saved = omp_get_max_threads();
    auto in = reference::random_inputs(6, 2, 64, 700, 700, 7);
    auto dec = reference::random_inputs(6, 2, 64, 1, 5000, 8);
    in.shape.window = 129;
    dec.shape.window = 1000;
    std::vector<float> out1(in.q.size()), out2(in.q.size()), lse1(6 * 700), lse2(6 * 700);
    std::vector<float> dec1(dec.q.size()), dec2(dec.q.size());
    omp_set_num_threads(1);
    attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out1.data(), lse1.data());
    attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dec1.data());
    omp_set_num_threads(2);
    attn_dense_prefill(in.shape, in.q.data(), in.k.data(), in.v.data(), out2.data(), lse2.data());
    attn_dense_decode(dec.shape, dec.q.data(), dec.k.data(), dec.v.data(), dec2.data());
    omp_set_num_threads(saved);
    EXPECT_EQ(out1, out2);
    EXPECT_EQ(lse1, lse2);
    EXPECT_EQ(dec1, dec2);
}

}  // namespace
}  // namespace kascade
