// tests/runtime/runtime_logits.h: the runtime's logits for a token sequence (prefill or token-by-token decode with
// the KV cache), and the error measure every forward test compares them with the naive reference by.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "io/weights/model_weights.h"
#include "pipeline/runtime/transformer.h"

namespace kascade::test {

/// max |runtime - naive| / max |naive| over every logit of every position; a non-finite runtime logit fails.
inline double relative_error(const std::vector<float>& runtime, const std::vector<std::vector<double>>& reference) {
    double max_diff = 0, max_ref = 0;
    const size_t vocab = reference[0].size();
    for (size_t t = 0; t < reference.size(); ++t) {
        for (size_t i = 0; i < vocab; ++i) {
            const double r = reference[t][i];
            const double x = runtime[t * vocab + i];
            EXPECT_TRUE(std::isfinite(x)) << "position " << t << " logit " << i;
            max_diff = std::max(max_diff, std::abs(x - r));
            max_ref = std::max(max_ref, std::abs(r));
        }
    }
    return max_diff / max_ref;
}

/// The largest relative_error of the runtime's logits against the naive reference that a forward test accepts.
inline constexpr double kMaxRelativeError = 1e-4;

/// Logits [n][vocab] of every position: one prefill pass, or (decode) one token at a time through the KV cache.
inline std::vector<float> runtime_logits(const ModelWeights& weights, const std::vector<int32_t>& tokens, bool decode,
                                         MatmulPrecision precision = MatmulPrecision::Exact) {
    const int n = static_cast<int>(tokens.size());
    const ModelConfig& c = weights.config;
    Transformer model(weights, n, precision);
    DenseAttention attention;
    KvCache cache(c, n);
    std::vector<float> hidden(static_cast<size_t>(n) * c.dim);
    std::vector<float> logits(static_cast<size_t>(n) * c.vocab_size);
    if (!decode) {
        model.forward(tokens, cache, attention, hidden.data());
        model.lm_head(hidden.data(), n, logits.data());
        return logits;
    }
    for (int t = 0; t < n; ++t) {
        model.forward(std::span<const int32_t>(&tokens[t], 1), cache, attention, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data() + static_cast<size_t>(t) * c.vocab_size);
    }
    return logits;
}

}  // namespace kascade::test
