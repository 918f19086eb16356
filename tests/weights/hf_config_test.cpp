// tests/weights/hf_config_test.cpp: config.json parsing: real configs, HF defaults, token id forms, and one test per
// kind of bad field (the message must name the file and the field).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/weights/model_config.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

using nlohmann::json;

json minimal_llama() {
    return {{"model_type", "llama"},    {"hidden_size", 64}, {"intermediate_size", 172},       {"num_hidden_layers", 5},
            {"num_attention_heads", 8}, {"vocab_size", 512}, {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}};
}

ModelConfig parse(const test::TempDir& dir, const json& config) {
    test::write_bytes(dir / "config.json", config.dump());
    return load_hf_config(dir / "config.json");
}

std::string parse_error(const test::TempDir& dir, const json& config) {
    return test::error_message([&] { parse(dir, config); });
}

TEST(HfConfig, SmolLM2Config) {
    const ModelConfig c = load_hf_config(test::shared_dir() / "models/smollm2-135m-tokenizer/config.json");
    EXPECT_EQ(c.model_type, "llama");
    EXPECT_EQ(c.dim, 576);
    EXPECT_EQ(c.hidden_dim, 1536);
    EXPECT_EQ(c.n_layers, 30);
    EXPECT_EQ(c.n_heads, 9);
    EXPECT_EQ(c.n_kv_heads, 3);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.vocab_size, 49152);
    EXPECT_EQ(c.max_seq_len, 8192);
    EXPECT_EQ(c.rope_theta, 100000.0f);
    EXPECT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);
    EXPECT_EQ(c.rope_layout, RopeLayout::RotateHalf);
}

TEST(HfConfig, DefaultsOfAbsentFields) {
    test::TempDir dir;
    const ModelConfig c = parse(dir, minimal_llama());
    EXPECT_EQ(c.n_kv_heads, 8);  // = num_attention_heads
    EXPECT_EQ(c.head_dim, 8);    // = hidden_size / num_attention_heads
    EXPECT_EQ(c.rope_theta, 10000.0f);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_FALSE(c.tie_word_embeddings);  // LlamaConfig's default
    EXPECT_EQ(c.bos_token_id, -1);
    EXPECT_EQ(c.eos_token_id, -1);
}

TEST(HfConfig, ExplicitHeadDimAndNullsAndTokenLists) {
    test::TempDir dir;
    json j = minimal_llama();
    j["head_dim"] = 16;  // need not equal hidden_size / num_attention_heads
    j["num_key_value_heads"] = nullptr;
    j["rope_scaling"] = nullptr;
    j["bos_token_id"] = nullptr;
    j["eos_token_id"] = {128001, 128008};
    const ModelConfig c = parse(dir, j);
    EXPECT_EQ(c.head_dim, 16);
    EXPECT_EQ(c.n_kv_heads, 8);
    EXPECT_EQ(c.bos_token_id, -1);
    EXPECT_EQ(c.eos_token_id, 128001);
}

TEST(HfConfig, Qwen2HasBiasesUnlessToldOtherwise) {
    test::TempDir dir;
    json j = minimal_llama();
    j["model_type"] = "qwen2";
    EXPECT_TRUE(parse(dir, j).attention_bias);
    j["attention_bias"] = false;
    EXPECT_FALSE(parse(dir, j).attention_bias);
    j["model_type"] = "llama";
    j["attention_bias"] = true;
    EXPECT_TRUE(parse(dir, j).attention_bias);
}

struct BadConfigCase {
    const char* name;
    const char* field;     ///< set to `value`, or erased when value is "<erase>"
    const char* value;     ///< JSON text
    const char* expected;  ///< substring of the message
};

class HfConfigBad : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(HfConfigBad, NamesFileAndField) {
    const BadConfigCase& bad = GetParam();
    test::TempDir dir;
    json j = minimal_llama();
    if (std::string(bad.value) == "<erase>") {
        j.erase(bad.field);
    } else {
        j[bad.field] = json::parse(bad.value);
    }
    const std::string msg = parse_error(dir, j);
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad.expected), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, HfConfigBad,
    ::testing::Values(
        BadConfigCase{"MissingHiddenSize", "hidden_size", "<erase>", "required field \"hidden_size\" is missing"},
        BadConfigCase{"MissingModelType", "model_type", "<erase>", "required field \"model_type\" is missing"},
        BadConfigCase{"MissingEps", "rms_norm_eps", "<erase>", "required field \"rms_norm_eps\" is missing"},
        BadConfigCase{"StringLayers", "num_hidden_layers", "\"5\"",
                      "field \"num_hidden_layers\" must be an integer, found \"5\""},
        BadConfigCase{"FloatVocab", "vocab_size", "512.5", "field \"vocab_size\" must be an integer, found 512.5"},
        BadConfigCase{"ZeroHeads", "num_attention_heads", "0", "field \"num_attention_heads\" = 0 must be a positive"},
        BadConfigCase{"NegativeDim", "intermediate_size", "-4", "field \"intermediate_size\" = -4 must be a positive"},
        BadConfigCase{"ZeroEps", "rms_norm_eps", "0", "field \"rms_norm_eps\" = 0 must be a positive number"},
        // Positive as JSON, but 0 as the float the model uses (found by fuzzing).
        BadConfigCase{"EpsBelowFloat", "rms_norm_eps", "1e-86",
                      "\"rms_norm_eps\" = 1e-86 must be a positive number a float can hold"},
        BadConfigCase{"StringTheta", "rope_theta", "\"1e4\"", "field \"rope_theta\" must be a number"},
        BadConfigCase{"StringTie", "tie_word_embeddings", "\"yes\"",
                      "field \"tie_word_embeddings\" must be true or false"},
        BadConfigCase{"KvNotDividing", "num_key_value_heads", "3",
                      "num_attention_heads = 8 is not divisible by num_key_value_heads = 3"},
        BadConfigCase{"UnsupportedType", "model_type", "\"gpt2\"",
                      "model_type \"gpt2\" is not supported (supported: llama, mistral, qwen2, qwen3)"},
        BadConfigCase{"OddHeadDim", "head_dim", "7", "head_dim = 7 must be even"},
        BadConfigCase{"BadTokenId", "eos_token_id", "\"</s>\"", "field \"eos_token_id\" must be a non-negative"},
        BadConfigCase{"RopeScalingDynamic", "rope_scaling", R"({"rope_type": "dynamic", "factor": 8.0})",
                      "field \"rope_scaling.rope_type\" = \"dynamic\" is not supported (supported: default, linear, "
                      "llama3, yarn)"},
        BadConfigCase{"RopeScalingLlama3Incomplete", "rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})",
                      "required field \"rope_scaling.low_freq_factor\" is missing"},
        BadConfigCase{"RopeScalingNoType", "rope_scaling", R"({"factor": 2.0})",
                      "field \"rope_scaling.rope_type\" is missing"},
        BadConfigCase{"RopeScalingNegativeFactor", "rope_scaling", R"({"type": "linear", "factor": -2})",
                      "field \"rope_scaling.factor\" must be a positive number, found -2"},
        BadConfigCase{"LayerTypesWrongLength", "layer_types", R"(["full_attention"])",
                      "field \"layer_types\" must be a list of num_hidden_layers = 5 entries"},
        BadConfigCase{"MlpBias", "mlp_bias", "true", "field \"mlp_bias\" = true is not supported"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(HfConfig, PublishedFamilyConfigs) {
    const auto configs = test::shared_dir() / "models/configs";
    const ModelConfig llama31 = load_hf_config(configs / "llama-3.1-8b/config.json");
    EXPECT_EQ(llama31.rope_scaling.type, RopeScalingType::Llama3);
    EXPECT_EQ(llama31.rope_scaling.factor, 8.0);
    EXPECT_EQ(llama31.rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_FALSE(llama31.tie_word_embeddings);
    EXPECT_FALSE(llama31.has_window());

    const ModelConfig qwen3 = load_hf_config(configs / "qwen3-0.6b/config.json");
    EXPECT_EQ(qwen3.model_type, "qwen3");
    EXPECT_TRUE(qwen3.qk_norm);
    EXPECT_EQ(qwen3.head_dim, 128);  // explicit, not hidden_size / heads = 64
    EXPECT_FALSE(qwen3.attention_bias);
    EXPECT_FALSE(qwen3.has_window());

    const ModelConfig qwen25 = load_hf_config(configs / "qwen2.5-0.5b/config.json");
    EXPECT_TRUE(qwen25.attention_bias);
    EXPECT_FALSE(qwen25.has_window());  // sliding_window is set but use_sliding_window is false
    EXPECT_EQ(qwen25.rope_scaling.type, RopeScalingType::None);

    const ModelConfig mistral = load_hf_config(configs / "mistral-7b-v0.1/config.json");
    EXPECT_EQ(mistral.layer_window, std::vector<int>(32, 4096));
}

TEST(HfConfig, WindowsOfQwenAndLayerTypes) {
    test::TempDir dir;
    json j = minimal_llama();
    j["model_type"] = "qwen2";
    j["sliding_window"] = 64;
    j["use_sliding_window"] = true;
    j["max_window_layers"] = 3;
    EXPECT_EQ(parse(dir, j).layer_window, (std::vector<int>{0, 0, 0, 64, 64}));
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention", "full_attention"};
    EXPECT_EQ(parse(dir, j).layer_window, (std::vector<int>{64, 0, 64, 0, 0}));
    j = minimal_llama();
    j["sliding_window"] = 64;  // Llama has no sliding window, as in Hugging Face's LlamaModel
    EXPECT_FALSE(parse(dir, j).has_window());
}

TEST(HfConfig, YarnDefaultsAndRopeParameters) {
    test::TempDir dir;
    json j = minimal_llama();
    j["max_position_embeddings"] = 4096;
    j["rope_scaling"] = {{"type", "yarn"}, {"original_max_position_embeddings", 1024}};
    ModelConfig c = parse(dir, j);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Yarn);
    EXPECT_EQ(c.rope_scaling.factor, 4.0);  // max_position_embeddings / original
    EXPECT_EQ(c.rope_scaling.beta_fast, 32.0);
    j.erase("rope_scaling");
    j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 250000.0}};
    c = parse(dir, j);
    EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Linear);
    EXPECT_EQ(c.rope_theta, 250000.0f);
}

TEST(HfConfig, NotJsonAndMissingFile) {
    test::TempDir dir;
    test::write_bytes(dir / "config.json", "{\"model_type\": \"llama\",");
    std::string msg = test::error_message([&] { load_hf_config(dir / "config.json"); });
    EXPECT_NE(msg.find("config.json: not valid JSON"), std::string::npos) << msg;
    msg = test::error_message([&] { load_hf_config(dir / "absent.json"); });
    EXPECT_NE(msg.find("absent.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kascade
