// tests/runtime/test_rope_frequencies.cpp: rope_scaling frequencies against values derived by hand from Hugging Face's
// formulas (computed once in double precision with a few lines of Python, written out below), for the real
// Llama-3.2-1B config.json and a Qwen2.5-style YaRN setting; pairs 15-17 of llama3 fall in its blended band.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "io/weights/model_config.h"
#include "pipeline/runtime/rope_frequencies.h"

using namespace kascade;

namespace {

ModelConfig config_with(int head_dim, float theta, RopeScaling scaling) {
    ModelConfig c;
    c.head_dim = head_dim;
    c.rope_theta = theta;
    c.rope_scaling = scaling;
    return c;
}

void expect_close(double actual, double expected, int pair) {
    EXPECT_NEAR(actual, expected, 1e-12 * std::abs(expected)) << "pair " << pair;
}

TEST(RopeFrequencies, Llama3OfLlama32_1bConfig) {
    const ModelConfig c =
        load_hf_config(std::filesystem::path(KASCADE_SHARED_DIR) / "models/configs/llama-3.2-1b/config.json");
    ASSERT_EQ(c.rope_scaling.type, RopeScalingType::Llama3);
    const RopeFrequencies f = rope_frequencies(c);
    ASSERT_EQ(f.inv_freq.size(), 32u);
    EXPECT_EQ(f.attention_factor, 1.0);
    const struct {
        int pair;
        double inv_freq;
    } expected[] = {{0, 1.0},
                    {10, 0.016560440080994446},  // high frequency: unchanged
                    {15, 0.001290547928209264},  // blended band
                    {16, 0.00042955679655936815},
                    {17, 9.70828780262767e-05},
                    {18, 1.9461638184831125e-05},  // low frequency: divided by factor 32
                    {20, 8.570255489881478e-06},
                    {31, 9.418306725434909e-08}};
    for (const auto& e : expected) expect_close(f.inv_freq[e.pair], e.inv_freq, e.pair);
}

TEST(RopeFrequencies, YarnFactor4) {
    RopeScaling s;
    s.type = RopeScalingType::Yarn;
    s.factor = 4;
    s.original_max_position_embeddings = 32768;
    const RopeFrequencies f = rope_frequencies(config_with(64, 1e6f, s));
    // Correction range [floor(11.80), ceil(19.83)] = [11, 20]: pairs below 11 keep their frequency, above 20 are
    // divided by 4, and the attention factor is 0.1 ln 4 + 1.
    const struct {
        int pair;
        double inv_freq;
    } expected[] = {{0, 1.0},
                    {5, 0.1154781984689458},
                    {10, 0.01333521432163324},
                    {12, 0.005154795480911533},
                    {20, 4.445698525097307e-05},
                    {31, 3.84981631514873e-07}};
    for (const auto& e : expected) expect_close(f.inv_freq[e.pair], e.inv_freq, e.pair);
    EXPECT_NEAR(f.attention_factor, 1.138629436111989, 1e-15);
}

TEST(RopeFrequencies, LinearDividesEveryFrequency) {
    RopeScaling s;
    s.type = RopeScalingType::Linear;
    s.factor = 2;
    const RopeFrequencies f = rope_frequencies(config_with(8, 10000.0f, s));
    // theta^(-2j/8) / 2 for j = 0..3: 1/2, 0.1/2, 0.01/2, 0.001/2.
    const double expected[] = {0.5, 0.05, 0.005, 0.0005};
    for (int j = 0; j < 4; ++j) expect_close(f.inv_freq[j], expected[j], j);
}

}  // namespace
