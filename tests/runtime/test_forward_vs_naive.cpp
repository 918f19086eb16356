// tests/runtime/test_forward_vs_naive.cpp: the runtime's logits against the independent double-precision forward
// in naive_llama.h, on the real stories260K weights (both file formats) and on a randomly initialised model with
// SmolLM2-135M's exact config.json written as BF16 safetensors; and the perplexity of several windows (LM head in
// chunks, log-softmax scoring) against the naive logits scored in double.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "common/shared_files.h"
#include "common/temp_dir.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/transformer.h"
#include "reference/naive_llama.h"
#include "reference/random_checkpoint.h"
#include "runtime_logits.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

using test::kMaxRelativeError;

using test::relative_error;

std::vector<float> runtime_prefill_logits(const ModelWeights& weights, const std::vector<int32_t>& tokens) {
    return test::runtime_logits(weights, tokens, false);
}

std::vector<float> runtime_decode_logits(const ModelWeights& weights, const std::vector<int32_t>& tokens) {
    return test::runtime_logits(weights, tokens, true);
}

/// Reads a llama2.c legacy checkpoint with its own offset arithmetic (not the runtime's loader).
naive::Model read_llama2c_naively(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    int32_t header[7];
    in.read(reinterpret_cast<char*>(header), sizeof header);
    naive::Model m;
    m.dim = header[0];
    m.hidden = header[1];
    m.n_layers = header[2];
    m.n_heads = header[3];
    m.n_kv_heads = header[4];
    m.vocab = std::abs(header[5]);
    const int seq_len = header[6];
    m.head_dim = m.dim / m.n_heads;
    m.interleaved_rope = true;
    auto read = [&](size_t count) {
        naive::Weights f(count);
        in.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(count * sizeof(float)));
        return f;
    };
    const int L = m.n_layers, D = m.dim, H = m.hidden, KV = m.n_kv_heads * m.head_dim;
    m.embed = read(static_cast<size_t>(m.vocab) * D);
    m.layers.resize(L);
    auto per_layer = [&](naive::Weights naive::Layer::*field, size_t count) {
        for (auto& layer : m.layers) layer.*field = read(count);
    };
    per_layer(&naive::Layer::attn_norm, D);
    per_layer(&naive::Layer::wq, static_cast<size_t>(D) * D);
    per_layer(&naive::Layer::wk, static_cast<size_t>(KV) * D);
    per_layer(&naive::Layer::wv, static_cast<size_t>(KV) * D);
    per_layer(&naive::Layer::wo, static_cast<size_t>(D) * D);
    per_layer(&naive::Layer::mlp_norm, D);
    per_layer(&naive::Layer::gate, static_cast<size_t>(H) * D);
    per_layer(&naive::Layer::down, static_cast<size_t>(D) * H);
    per_layer(&naive::Layer::up, static_cast<size_t>(H) * D);
    m.final_norm = read(D);
    read(static_cast<size_t>(seq_len) * m.head_dim);  // freq_cis_real + freq_cis_imag, unused
    m.lm_head = header[5] > 0 ? m.embed : read(static_cast<size_t>(m.vocab) * D);
    EXPECT_TRUE(in.good()) << path;
    return m;
}

std::vector<int32_t> test_tokens(int n, int vocab, int first, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
    std::vector<int32_t> tokens{first};
    while (static_cast<int>(tokens.size()) < n) tokens.push_back(pick(rng));
    return tokens;
}

TEST(ForwardVsNaive, Stories260kLlama2cCheckpoint) {
    const fs::path bin = test::kStoriesBin;
    const naive::Model reference_model = read_llama2c_naively(bin);
    const auto tokens = test_tokens(40, reference_model.vocab, /*BOS=*/1, 7);
    const auto reference = naive::logits(reference_model, tokens);
    const ModelWeights weights = load_model(bin);
    EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
    EXPECT_LT(relative_error(runtime_decode_logits(weights, tokens), reference), kMaxRelativeError);
}

TEST(ForwardVsNaive, Stories260kHuggingFaceDirectory) {
    // The HF copy stores q/k rows permuted for rotate_half RoPE; the logits must still be those of the original.
    const naive::Model reference_model = read_llama2c_naively(test::kStoriesBin);
    const auto tokens = test_tokens(40, reference_model.vocab, /*BOS=*/1, 8);
    const auto reference = naive::logits(reference_model, tokens);
    const ModelWeights weights = load_model(test::kSharedDir / "models/stories260K-hf");
    EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
}

// ---- a randomly initialised SmolLM2-135M-shaped model, BF16 safetensors ---------------------------------------------

TEST(ForwardVsNaive, RandomSmolLM2ShapedModelFromBf16Safetensors) {
    const nlohmann::json config =
        nlohmann::json::parse(std::ifstream(test::kSharedDir / "models/smollm2-135m-tokenizer/config.json"));
    test::TempDir dir("smollm2-random");
    const naive::Model m = naive::write_random_checkpoint(config, dir.path(), 2024);
    ASSERT_EQ(m.n_layers, 30);
    ASSERT_EQ(m.n_heads, 9);
    ASSERT_EQ(m.n_kv_heads, 3);
    ASSERT_EQ(m.lm_head, m.embed);  // tied

    const auto tokens = test_tokens(9, m.vocab, /*BOS=*/1, 9);
    const auto reference = naive::logits(m, tokens);
    const ModelWeights weights = load_model(dir.path());
    EXPECT_EQ(weights.config.n_layers, 30);
    EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
    EXPECT_LT(relative_error(runtime_decode_logits(weights, tokens), reference), kMaxRelativeError);
}

// ---- perplexity: windows, LM-head chunks and scoring ---------------------------------------------------------------

/// log(sum exp(z)) - z[target], in double.
double naive_nll(const std::vector<double>& z, int target) {
    const double z_max = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (const double v : z) sum += std::exp(v - z_max);
    return z_max + std::log(sum) - z[target];
}

TEST(PerplexityVsNaive, Stories260kWindowsOfSeveralLogitChunks) {
    // 301 text tokens in windows of BOS + 159: two windows (159 and 142 tokens scored), each longer than one LM-head
    // chunk of rows.
    const fs::path bin = test::kStoriesBin;
    const naive::Model m = read_llama2c_naively(bin);
    const int32_t bos = 1;
    const std::vector<int32_t> text = test_tokens(301, m.vocab, 5, 10);
    const PerplexityOptions options{.ctx = 160, .offset = 0, .max_tokens = 0};
    double nll_sum = 0;
    int64_t scored = 0;
    for (size_t b = 0; b < text.size(); b += options.ctx - 1) {
        std::vector<int32_t> input{bos};
        input.insert(input.end(), text.begin() + b, text.begin() + std::min(text.size(), b + options.ctx - 1));
        const auto logits = naive::logits(m, input);
        for (size_t i = 0; i + 1 < input.size(); ++i, ++scored) nll_sum += naive_nll(logits[i], input[i + 1]);
    }
    const ModelWeights weights = load_model(bin);
    const Transformer model(weights);
    DenseAttention dense;
    const PerplexityResult r = evaluate_perplexity(model, dense, text, bos, options);
    EXPECT_EQ(r.n_windows, 2);
    EXPECT_EQ(r.n_scored, scored);
    EXPECT_NEAR(r.mean_nll(), nll_sum / scored, 1e-5);
}

}  // namespace
