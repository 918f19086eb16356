// tests/runtime/test_gguf_models.cpp: forward passes of GGUF files written by llama.cpp's converter and llama-quantize
// (tests/fixtures/gguf) against the same weights read from safetensors: logits of the F32 and BF16 files against
// stories260K's Hugging Face folder, perplexity of the Q8_0 and Q4_K_M files against gguf-py's dequantization of the
// same file written as a Hugging Face folder.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "common/shared_files.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/rope_frequencies.h"
#include "pipeline/runtime/transformer.h"
#include "runtime_logits.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(KASCADE_SOURCE_DIR) / "tests/fixtures/gguf";
constexpr double kMaxRelative = 1e-6;

/// max |a - b| / max |b| over every logit.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    double max_diff = 0, max_ref = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        EXPECT_TRUE(std::isfinite(a[i])) << i;
        max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
        max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
    }
    return max_diff / max_ref;
}

/// The first `n` ids of the fixture text with the model's own tokenizer, after its BOS.
std::vector<int32_t> text_tokens(const fs::path& model, std::size_t n) {
    const auto tokenizer = load_tokenizer(find_tokenizer_for_model(model));
    std::vector<int32_t> ids = tokenizer->encode(read_file(kFixtures / "tokenizer-text.txt"));
    ids.resize(std::min(ids.size(), n));
    return ids;
}

TEST(GgufModels, F32LogitsEqualTheHuggingFaceCheckpoint) {
    std::vector<int32_t> tokens = text_tokens(kFixtures / "stories260K-f32.gguf", 200);
    tokens.insert(tokens.begin(), 1);
    const ModelWeights gguf = load_model(kFixtures / "stories260K-f32.gguf");
    const ModelWeights hf = load_model(test::kSharedDir / "models/stories260K-hf");
    const double prefill =
        relative_error(test::runtime_logits(gguf, tokens, false), test::runtime_logits(hf, tokens, false));
    const double decode =
        relative_error(test::runtime_logits(gguf, tokens, true), test::runtime_logits(hf, tokens, true));
    EXPECT_LT(prefill, kMaxRelative);
    EXPECT_LT(decode, kMaxRelative);
    RecordProperty("relative_error", fmt::format("prefill {:g}, decode {:g}", prefill, decode));
}

TEST(GgufModels, Bf16LogitsEqualTheCheckpointLoadedAsBf16) {
    std::vector<int32_t> tokens = text_tokens(kFixtures / "stories260K-bf16.gguf", 200);
    tokens.insert(tokens.begin(), 1);
    const ModelWeights gguf = load_model(kFixtures / "stories260K-bf16.gguf");
    const ModelWeights hf =
        load_model(test::kSharedDir / "models/stories260K-hf", {.weights_dtype = WeightsDType::BF16});
    for (const MatmulPrecision precision : {MatmulPrecision::Exact, MatmulPrecision::Bf16}) {
        const double error = relative_error(test::runtime_logits(gguf, tokens, false, precision),
                                            test::runtime_logits(hf, tokens, false, precision));
        EXPECT_LT(error, kMaxRelative);
        RecordProperty(precision == MatmulPrecision::Exact ? "relative_error_exact" : "relative_error_bf16",
                       fmt::format("{:g}", error));
    }
}

TEST(GgufModels, RopeFreqsTensorGivesLlama31Frequencies) {
    // The converter computed Llama 3.1's factors in Python and stored them as F32; kascade's llama3 rope_scaling of
    // the config.json the file came from computes the frequencies in double. They agree to float precision.
    const ModelWeights gguf = load_model(kFixtures / "llama31-rope-bf16.gguf");
    ASSERT_EQ(gguf.config.rope_freq_factors.size(), 16u);
    EXPECT_EQ(gguf.config.rope_scaling.type, RopeScalingType::None);
    const ModelConfig hf = load_hf_config(kFixtures / "llama31-rope-config.json");
    ASSERT_EQ(hf.rope_scaling.type, RopeScalingType::Llama3);
    const RopeFrequencies g = rope_frequencies(gguf.config);
    const RopeFrequencies h = rope_frequencies(hf);
    ASSERT_EQ(g.inv_freq.size(), h.inv_freq.size());
    int scaled = 0;
    for (std::size_t j = 0; j < h.inv_freq.size(); ++j) {
        EXPECT_NEAR(g.inv_freq[j] / h.inv_freq[j], 1.0, 1e-6) << j;
        scaled += gguf.config.rope_freq_factors[j] != 1.0;
    }
    EXPECT_GT(scaled, 4);  // the low frequencies are divided by up to 8
}

PerplexityResult perplexity(const fs::path& model, const std::vector<int32_t>& text, int32_t bos) {
    const ModelWeights weights = load_model(model);
    const Transformer transformer(weights);
    DenseAttention dense;
    PerplexityOptions options;
    options.ctx = 128;
    return evaluate_perplexity(transformer, dense, text, bos, options);
}

TEST(GgufModels, QuantizedPerplexityEqualsGgufPysDequantization) {
    for (const char* name : {"stories260K-q8_0", "random-bpe-q4_k_m"}) {
        SCOPED_TRACE(name);
        const fs::path gguf = kFixtures / (std::string(name) + ".gguf");
        const std::vector<int32_t> text = text_tokens(gguf, 640);
        const int32_t bos = load_model(gguf).config.bos_token_id;
        const PerplexityResult q = perplexity(gguf, text, bos);
        const PerplexityResult r = perplexity(kFixtures / (std::string(name) + "-reference"), text, bos);
        ASSERT_EQ(q.n_scored, r.n_scored);
        EXPECT_GT(q.n_scored, 600);
        const double relative = std::abs(q.perplexity() - r.perplexity()) / r.perplexity();
        EXPECT_LT(relative, kMaxRelative) << q.perplexity() << " vs " << r.perplexity();
        RecordProperty(std::string(name) + "_perplexity",
                       fmt::format("{:.9g} vs {:.9g}", q.perplexity(), r.perplexity()));
    }
}

}  // namespace
}  // namespace kascade
