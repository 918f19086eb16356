// tests/runtime/teacher_forced_decode.h: what the decode-policy tests share: a token sequence, decoding it one token at
// a time after a dense prefill (teacher forcing) with its summed NLL, the causal keys such a decode sees, and a small
// random-weight GQA config with a sliding window.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/transformer.h"

namespace kascade::test {

inline std::vector<int32_t> tokens_for_test(int n, int vocab) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = 3 + (i * 37 + (i / 7) * 11) % (vocab - 3);
    return t;
}

/// Prefills tokens[0 .. prompt) densely, then feeds tokens[prompt .. n-1) one at a time through `policy`; returns the
/// summed negative log-likelihood (double) of tokens[prompt+1 .. n) under the decode steps' logits.
inline double teacher_forced_decode_nll(const Transformer& model, AttentionPolicy& policy,
                                        const std::vector<int32_t>& tokens, int prompt) {
    const ModelConfig& c = model.config();
    const int n = static_cast<int>(tokens.size());
    KvCache cache(c, n, policy.kv_page_size());
    DenseAttention dense;
    std::vector<float> hidden(static_cast<size_t>(prompt) * c.dim), logits(c.vocab_size);
    model.forward(std::span(tokens).first(prompt), cache, dense, hidden.data());
    double nll = 0;
    for (int t = prompt; t + 1 < n; ++t) {
        model.forward(std::span(tokens).subspan(t, 1), cache, policy, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data());
        double m = -INFINITY;
        for (float x : logits) m = std::max(m, static_cast<double>(x));
        double sum = 0;
        for (float x : logits) sum += std::exp(x - m);
        nll += m + std::log(sum) - logits[tokens[t + 1]];
    }
    return nll;
}

/// Causal keys of `steps` decode steps after a prompt of `prompt` tokens, per query head, with window w (0 = none).
inline double decode_causal_keys(int prompt, int steps, int window) {
    double keys = 0;
    for (int n_k = prompt + 1; n_k <= prompt + steps; ++n_k) keys += window > 0 ? std::min(n_k, window) : n_k;
    return keys;
}

/// Mistral-7B's config.json cut to 5 layers of GQA 4/2, head_dim 16, with the given sliding window.
inline nlohmann::json small_windowed_gqa_config(int window) {
    nlohmann::json config = nlohmann::json::parse(
        std::ifstream(std::filesystem::path(KASCADE_SHARED_DIR) / "models/configs/mistral-7b-v0.1/config.json"));
    config["num_hidden_layers"] = 5;
    config["vocab_size"] = 256;
    config["bos_token_id"] = 1;
    config["eos_token_id"] = 2;
    config["hidden_size"] = 64;
    config["intermediate_size"] = 96;
    config["num_attention_heads"] = 4;
    config["num_key_value_heads"] = 2;
    config["head_dim"] = 16;
    config["sliding_window"] = window;
    return config;
}

}  // namespace kascade::test
