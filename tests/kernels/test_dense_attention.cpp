// tests/kernels/test_dense_attention.cpp: dense causal prefill, LSE and decode against the double-precision
// reference (kernels/reference), over head sizes, GQA ratios, lengths and thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "kernels/dense_attention.h"
#include "kernels/reference/attention_reference.h"

namespace kascade {
namespace {

constexpr double kTolerance = 2e-5;  ///< max abs error vs the double reference (acceptance bound)

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
        EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kTolerance);
        EXPECT_LT(reference::max_abs_diff(lse.data(), ref_lse.data(), lse.size()), kTolerance);
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
                EXPECT_LT(reference::max_abs_diff(out.data(), ref.data(), out.size()), kTolerance);
            }
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

}  // namespace
}  // namespace kascade
