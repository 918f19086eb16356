// tests/runtime/test_model_families.cpp: every model family kascade supports, loaded through the normal path from a
// random BF16 checkpoint with the real config.json of a published model (../shared/models/configs: Llama 3.1 / 3.2,
// Qwen2.5, Qwen3, Mistral, TinyLlama), cut to 2 layers and a 1024-token vocabulary; the logits must equal the
// independent double-precision forward of naive_llama.h for prefill and for decode with the KV cache. Sliding windows
// are checked on small models, where a window shorter than the sequence changes the result.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/temp_dir.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/runtime/transformer.h"
#include "reference/naive_llama.h"
#include "reference/random_checkpoint.h"
#include "runtime_logits.h"

namespace fs = std::filesystem;
using namespace kascade;
using nlohmann::json;

namespace {

using test::kMaxRelativeError;

using test::relative_error;
using test::runtime_logits;

/// Mean negative log-likelihood of tokens[t + 1] given the logits at t.
double mean_nll(const std::vector<float>& logits, const std::vector<int32_t>& tokens, int vocab) {
    double total = 0;
    for (size_t t = 0; t + 1 < tokens.size(); ++t) {
        const float* row = logits.data() + t * vocab;
        double m = row[0];
        for (int i = 1; i < vocab; ++i) m = std::max(m, static_cast<double>(row[i]));
        double sum = 0;
        for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] - m);
        total += m + std::log(sum) - row[tokens[t + 1]];
    }
    return total / static_cast<double>(tokens.size() - 1);
}

std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed) {
    naive::UniformSource rng(seed);
    std::vector<int32_t> tokens(n);
    for (int32_t& t : tokens) t = std::min(vocab - 1, static_cast<int32_t>((rng.next() + 1) / 2 * vocab));
    return tokens;
}

/// The published config.json of `family`, cut to `layers` layers and at most `vocab` tokens.
json family_config(const std::string& family, int layers, int vocab) {
    json config = json::parse(std::ifstream(fs::path(KASCADE_SHARED_DIR) / "models/configs" / family / "config.json"));
    config["num_hidden_layers"] = layers;
    if (config["vocab_size"].get<int>() > vocab) {
        config["vocab_size"] = vocab;
        config["bos_token_id"] = 1;
        config["eos_token_id"] = 2;
    }
    return config;
}

/// The normal path (weights stay BF16 in memory, exact fp32 products) and --weights-dtype f32 against the naive
/// forward, within 1e-4. The faster BF16-activation products (--matmul bf16) are checked against the naive forward
/// with the same declared input rounding, within kMaxBf16RelativeError: rounding to 8 significant bits makes the
/// result discontinuous, so the last-bit differences between fp32 and double arithmetic flip a few roundings and
/// give differences of order 1e-3, not 1e-5 (the kernel itself is checked at 1e-5 in tests/kernels/test_matmul.cpp).
constexpr double kMaxBf16RelativeError = 2e-2;

void expect_runtime_equals_naive(const json& config, int n_tokens, uint64_t seed) {
    test::TempDir dir("family");
    naive::Model reference_model = naive::write_random_checkpoint(config, dir.path(), seed);
    const std::vector<int32_t> tokens = random_tokens(n_tokens, reference_model.vocab, seed + 1);
    const auto reference = naive::logits(reference_model, tokens);
    for (WeightsDType dtype : {WeightsDType::File, WeightsDType::F32}) {
        SCOPED_TRACE(std::string("weights dtype ") + std::string(mode_name(dtype)));
        const ModelWeights weights = load_model(dir.path(), {.weights_dtype = dtype});
        EXPECT_EQ(weights.embed.dtype, dtype == WeightsDType::File ? DType::BF16 : DType::F32);
        EXPECT_LT(relative_error(runtime_logits(weights, tokens, false), reference), kMaxRelativeError) << "prefill";
        EXPECT_LT(relative_error(runtime_logits(weights, tokens, true), reference), kMaxRelativeError) << "decode";
    }
    reference_model.bf16_matmul_inputs = true;
    const auto rounded_reference = naive::logits(reference_model, tokens);
    const ModelWeights weights = load_model(dir.path());
    const auto prefill = runtime_logits(weights, tokens, false, MatmulPrecision::Bf16);
    EXPECT_LT(relative_error(prefill, rounded_reference), kMaxBf16RelativeError) << "bf16 prefill";
    // Products are batch-invariant, so decode gives the prefill's logits up to the attention kernels' fp32 rounding.
    EXPECT_LT(relative_error(runtime_logits(weights, tokens, true, MatmulPrecision::Bf16), rounded_reference),
              kMaxBf16RelativeError)
        << "bf16 decode";
}

class ModelFamily : public testing::TestWithParam<std::string> {};

TEST_P(ModelFamily, LogitsEqualNaiveForwardForPrefillAndDecode) {
    expect_runtime_equals_naive(family_config(GetParam(), 2, 1024), 7, 11);
}

INSTANTIATE_TEST_SUITE_P(PublishedConfigs, ModelFamily,
                         testing::Values("llama-3.2-1b", "llama-3.1-8b", "qwen2.5-0.5b", "qwen3-0.6b",
                                         "mistral-7b-v0.1", "tinyllama-1.1b"),
                         [](const testing::TestParamInfo<std::string>& info) {
                             std::string name;
                             for (char ch : info.param) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                             return name;
                         });

TEST(ModelFamily, EveryConfigInSharedIsCovered) {
    int count = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(KASCADE_SHARED_DIR) / "models/configs")) {
        count += entry.is_directory();
    }
    EXPECT_EQ(count, 6) << "a new config in ../shared/models/configs needs a case in PublishedConfigs";
}

/// A small model of `family` with a sliding window of `window` keys: shapes small enough for a 24-token sequence.
json small_windowed_config(const std::string& family, int window) {
    json config = family_config(family, 2, 256);
    config["hidden_size"] = 64;
    config["intermediate_size"] = 96;
    config["num_attention_heads"] = 4;
    config["num_key_value_heads"] = 2;
    config["head_dim"] = 16;
    config["sliding_window"] = window;
    return config;
}

TEST(SlidingWindow, MistralWindowShorterThanTheSequenceMatters) {
    constexpr int kTokens = 24, kWindow = 5;
    const json windowed = small_windowed_config("mistral-7b-v0.1", kWindow);
    expect_runtime_equals_naive(windowed, kTokens, 21);

    // The same weights without the window must give a clearly different NLL: the window is not a no-op.
    test::TempDir dir("window");
    const naive::Model m = naive::write_random_checkpoint(windowed, dir / "windowed", 21);
    json unwindowed = windowed;
    unwindowed["sliding_window"] = nullptr;
    naive::write_random_checkpoint(unwindowed, dir / "full", 21);
    const std::vector<int32_t> tokens = random_tokens(kTokens, m.vocab, 22);
    const double nll_windowed = mean_nll(runtime_logits(load_model(dir / "windowed"), tokens, false), tokens, m.vocab);
    const double nll_full = mean_nll(runtime_logits(load_model(dir / "full"), tokens, false), tokens, m.vocab);
    EXPECT_GT(std::abs(nll_windowed - nll_full), 1e-3) << nll_windowed << " vs " << nll_full;
}

TEST(SlidingWindow, QwenWindowsOnlyTheLayersFromMaxWindowLayers) {
    json config = small_windowed_config("qwen2.5-0.5b", 4);
    config["use_sliding_window"] = true;
    config["max_window_layers"] = 1;  // layer 0 full, layer 1 windowed
    const ModelConfig parsed = [&] {
        test::TempDir dir("qwen-window");
        naive::write_random_checkpoint(config, dir.path(), 31);
        return load_model(dir.path()).config;
    }();
    EXPECT_EQ(parsed.layer_window, (std::vector<int>{0, 4}));
    expect_runtime_equals_naive(config, 20, 31);
}

TEST(SlidingWindow, EverySparseMethodAtFullBudgetEqualsDenseOnAWindowedModel) {
    // A Mistral-family model (every layer windowed, 12 keys) over windows of 64 positions: with a top-k budget that
    // covers every candidate tile, Kascade (anchor + reuse with a permuted head map), the oracle and streaming must
    // give the dense windowed perplexity, and their density must be exactly 1 against the windowed causal pairs.
    json config = small_windowed_config("mistral-7b-v0.1", 12);
    config["num_hidden_layers"] = 4;
    test::TempDir dir("window-sparse");
    naive::write_random_checkpoint(config, dir.path(), 41);
    const ModelWeights w = load_model(dir.path());
    ASSERT_EQ(w.config.layer_window, std::vector<int>(4, 12));
    const Transformer model(w);
    const std::vector<int32_t> tokens = random_tokens(400, w.config.vocab_size, 42);
    PerplexityOptions options;
    options.ctx = 64;
    DenseAttention dense;
    const double ppl_dense = evaluate_perplexity(model, dense, tokens, 1, options).perplexity();

    AttentionSchedule schedule = AttentionSchedule::all_dense(4);
    schedule.layers[1].role = LayerRole::Anchor;
    schedule.layers[3].role = LayerRole::Anchor;
    schedule.layers[2].role = LayerRole::Reuse;
    schedule.layers[2].anchor = 1;
    schedule.layers[2].head_map = {1, 0};
    const SparseAttentionOptions full_budget{.tile = 4, .topk = {.tiles = 1000}};
    KascadeAttention kascade(schedule, full_budget);
    KascadeAttention oracle(AttentionSchedule::oracle(4), full_budget);
    StreamingAttention streaming(4, full_budget);
    const struct {
        const char* name;
        AttentionPolicy* policy;
        const std::vector<LayerDensity>* density;
    } methods[] = {{"kascade", &kascade, &kascade.layer_density()},
                   {"oracle", &oracle, &oracle.layer_density()},
                   {"streaming", &streaming, &streaming.layer_density()}};
    for (const auto& m : methods) {
        const double ppl = evaluate_perplexity(model, *m.policy, tokens, 1, options).perplexity();
        EXPECT_LT(std::abs(ppl - ppl_dense) / ppl_dense, 1e-6) << m.name << ": " << ppl << " vs " << ppl_dense;
        for (const LayerDensity& d : *m.density) EXPECT_EQ(d.ratio(), 1.0) << m.name;
    }
    // The window matters here: the same weights without it give another perplexity.
    json unwindowed = config;
    unwindowed["sliding_window"] = nullptr;
    test::TempDir full_dir("window-none");
    naive::write_random_checkpoint(unwindowed, full_dir.path(), 41);
    const ModelWeights w_full = load_model(full_dir.path());
    const Transformer model_full(w_full);
    const double ppl_full = evaluate_perplexity(model_full, dense, tokens, 1, options).perplexity();
    EXPECT_GT(std::abs(ppl_full - ppl_dense) / ppl_dense, 1e-4);
}

}  // namespace
