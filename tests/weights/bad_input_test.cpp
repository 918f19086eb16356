// tests/weights/bad_input_test.cpp: handcrafted bad weight files. Each must be rejected with a kascade::Error whose
// message names the file and says what is wrong.
#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/shared_files.h"
#include "io/weights/model_weights.h"
#include "io/weights/random_checkpoint.h"
#include "io/weights/safetensors.h"
#include "tiny_model.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

// Checks that loading `path` fails with a message containing the file name and every one of `parts`.
void expect_load_error(const std::filesystem::path& path, std::initializer_list<std::string> parts,
                       const std::string& file_name) {
    const std::string msg = test::error_message([&] { load_model(path); });
    EXPECT_NE(msg.find(file_name), std::string::npos) << "message does not name " << file_name << ": " << msg;
    for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

// A directory holding config.json and a model.safetensors with the given header and data.
void write_raw_model(const test::TempDir& dir, const std::string& header, const std::string& data) {
    test::make_tiny_model("llama", false, false, false).write_config(dir.path());
    test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(header, data));
}

TEST(BadInput, MissingPaths) {
    test::TempDir dir;
    expect_load_error(dir / "nope.bin", {"no such file"}, "nope.bin");
    expect_load_error(dir / "nope", {"no such file"}, "nope");
    expect_load_error(dir.path(), {"no config.json"}, dir.path().filename().string());
    test::make_tiny_model("llama", false, false, false).write_config(dir.path());
    expect_load_error(dir.path(), {"neither model.safetensors nor model.safetensors.index.json"},
                      dir.path().filename().string());
    test::write_bytes(dir / "weights.pt", "x");
    expect_load_error(dir / "weights.pt", {"expected a llama2.c .bin checkpoint"}, "weights.pt");
}

TEST(BadInput, SafetensorsTooShortForHeaderLength) {
    test::TempDir dir;
    write_raw_model(dir, "", "");
    test::write_bytes(dir / "model.safetensors", "abc");
    expect_load_error(dir.path(), {"file is 3 bytes, too short"}, "model.safetensors");
}

TEST(BadInput, SafetensorsTruncatedInHeader) {
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write(dir.path(), DType::BF16);
    const std::string bytes = test::read_bytes(dir / "model.safetensors");
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    test::write_bytes(dir / "model.safetensors", bytes.substr(0, 8 + header_len / 2));
    expect_load_error(dir.path(), {"header length " + std::to_string(header_len), "runs past the end of the file"},
                      "model.safetensors");
}

TEST(BadInput, SafetensorsTruncatedInData) {
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write(dir.path(), DType::BF16);
    const std::string bytes = test::read_bytes(dir / "model.safetensors");
    test::write_bytes(dir / "model.safetensors", bytes.substr(0, bytes.size() - 10));
    // The last tensor in the file (name order) is model.norm.weight.
    expect_load_error(dir.path(), {"tensor model.norm.weight", "past the end of the data region"}, "model.safetensors");
}

TEST(BadInput, SafetensorsHeaderNotJson) {
    test::TempDir dir;
    write_raw_model(dir, R"({"a": {"dtype": "F32", )", "");
    expect_load_error(dir.path(), {"header (23 bytes) is not valid JSON"}, "model.safetensors");
    write_raw_model(dir, R"([1, 2])", "");
    expect_load_error(dir.path(), {"header must be a JSON object"}, "model.safetensors");
}

struct BadHeaderCase {
    const char* name;
    const char* header;
    int data_bytes;
    const char* expected;
};

class SafetensorsBadHeader : public ::testing::TestWithParam<BadHeaderCase> {};

TEST_P(SafetensorsBadHeader, NamesFileTensorAndProblem) {
    const BadHeaderCase& bad = GetParam();
    test::TempDir dir;
    test::write_bytes(dir / "bad.safetensors",
                      test::safetensors_bytes(bad.header, std::string(static_cast<std::size_t>(bad.data_bytes), '\0')));
    const std::string msg = test::error_message([&] { SafetensorsFile file(dir / "bad.safetensors"); });
    EXPECT_NE(msg.find("bad.safetensors: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(bad.expected), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsBadHeader,
    ::testing::Values(
        BadHeaderCase{"Overlap",
                      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                      24, "tensors a (data_offsets [0, 16]) and b (data_offsets [8, 24]) overlap"},
        BadHeaderCase{"PastEnd", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 12,
                      "tensor a has data_offsets [0, 16], past the end of the data region (12 bytes"},
        BadHeaderCase{"Reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})", 16,
                      "tensor a has data_offsets [16, 0]: begin is after end"},
        BadHeaderCase{"SizeMismatch", R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,16]}})", 16,
                      "tensor a has 16 data bytes (data_offsets [0, 16]) but shape [2, 3] x BF16 needs 12"},
        BadHeaderCase{"UnknownDtypeF8", R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", 4,
                      "tensor a has unsupported dtype F8_E4M3 (supported: F32, F16, BF16)"},
        BadHeaderCase{"UnknownDtypeI64", R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8,
                      "tensor a has unsupported dtype I64 (supported: F32, F16, BF16)"},
        BadHeaderCase{"MissingDtype", R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4,
                      "header entry for tensor a has no \"dtype\""},
        BadHeaderCase{"MissingShape", R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4,
                      "header entry for tensor a has no \"shape\""},
        BadHeaderCase{"MissingOffsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4,
                      "header entry for tensor a has no \"data_offsets\""},
        BadHeaderCase{"NegativeExtent", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
                      "tensor a has shape [-1], expected non-negative integers"},
        BadHeaderCase{"OffsetsNotPair", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4,
                      "tensor a has data_offsets [0], expected [begin, end]"},
        BadHeaderCase{"EntryNotObject", R"({"a":[1,2]})", 0, "header entry for tensor a must be an object"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BadInput, ShapeDisagreesWithConfig) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    test::TinyTensor& k = m.tensors.at("model.layers.1.self_attn.k_proj.weight");
    k.shape = {8, 8};
    k.values.resize(64);
    m.write(dir.path(), DType::BF16);
    expect_load_error(dir.path(),
                      {"model.safetensors: tensor model.layers.1.self_attn.k_proj.weight has shape [8, 8], config.json "
                       "implies [4, 8]"},
                      "model.safetensors");
}

TEST(BadInput, ConfigDisagreesWithWeights) {
    // The same kind of mismatch, caused by the config: more heads than the weights have.
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write(dir.path(), DType::F32);
    m.config["num_key_value_heads"] = 2;
    m.write_config(dir.path());
    expect_load_error(dir.path(),
                      {"tensor model.layers.0.self_attn.k_proj.weight has shape [4, 8], config.json "
                       "implies [8, 8]"},
                      "model.safetensors");
}

TEST(BadInput, MissingTensor) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.tensors.erase("model.layers.1.mlp.up_proj.weight");
    m.write(dir.path(), DType::F32);
    expect_load_error(dir.path(), {"tensor model.layers.1.mlp.up_proj.weight is missing"}, "model.safetensors");
}

TEST(BadInput, MissingBiasOfQwen2) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("qwen2", false, false, false);
    m.write(dir.path(), DType::F32);
    expect_load_error(dir.path(), {"tensor model.layers.0.self_attn.q_proj.bias is missing"}, "model.safetensors");
}

TEST(BadInput, UntiedWithoutLmHead) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.config["tie_word_embeddings"] = false;
    m.write(dir.path(), DType::F32);
    expect_load_error(dir.path(), {"lm_head.weight is missing and config.json has tie_word_embeddings = false"},
                      "model.safetensors");
}

TEST(BadInput, BadConfigThroughLoadModel) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("gemma", false, false, false);
    m.write(dir.path(), DType::F32);
    expect_load_error(dir.path(), {"model_type \"gemma\" is not supported"}, "config.json");
}

TEST(BadInput, RandomCheckpointWithNonNumberInitializerRange) {
    test::TempDir dir;
    for (const nlohmann::json& bad : {nlohmann::json("0.02"), nlohmann::json(nullptr), nlohmann::json(-1.0)}) {
        test::TinyModel m = test::make_tiny_model("llama", false, false, false);
        m.config["initializer_range"] = bad;
        m.write_config(dir.path());
        const std::string msg =
            test::error_message([&] { write_random_checkpoint(dir / "config.json", dir / "out", {}); });
        EXPECT_EQ(msg, (dir / "config.json").string() +
                           ": field \"initializer_range\" must be a positive number, found " + bad.dump());
        EXPECT_FALSE(std::filesystem::exists(dir / "out" / "model.safetensors"));
    }
}

TEST(BadInput, ShardedIndexProblems) {
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write_config(dir.path());
    write_safetensors(dir / "shard-1.safetensors", m.to_write(DType::BF16));
    nlohmann::json weight_map;
    for (const auto& [name, t] : m.tensors) weight_map[name] = "shard-1.safetensors";

    weight_map["model.norm.weight"] = "shard-2.safetensors";
    test::write_bytes(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
    expect_load_error(dir.path(),
                      {"model.safetensors.index.json: weight_map puts tensor model.norm.weight in",
                       "shard-2.safetensors, which does not exist"},
                      "model.safetensors.index.json");

    weight_map["model.norm.weight"] = "shard-1.safetensors";
    weight_map["model.extra.weight"] = "shard-1.safetensors";
    test::write_bytes(dir / "model.safetensors.index.json", nlohmann::json{{"weight_map", weight_map}}.dump());
    expect_load_error(dir.path(), {"weight_map puts tensor model.extra.weight in", "which does not contain it"},
                      "model.safetensors.index.json");

    test::write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
    expect_load_error(dir.path(), {"has no \"weight_map\""}, "model.safetensors.index.json");
}

TEST(BadInput, Llama2cTruncatedOrTrailing) {
    test::TempDir dir;
    const std::string bytes = test::read_bytes(test::kStoriesBin);
    const std::string size = std::to_string(bytes.size());
    test::write_bytes(dir / "cut.bin", bytes.substr(0, bytes.size() - 100));
    expect_load_error(
        dir / "cut.bin",
        {"file is " + std::to_string(bytes.size() - 100) + " bytes", "implies " + size + " bytes", "truncated"},
        "cut.bin");
    test::write_bytes(dir / "long.bin", bytes + "xyz");
    expect_load_error(dir / "long.bin", {"implies " + size + " bytes", "trailing bytes"}, "long.bin");
    test::write_bytes(dir / "tiny.bin", bytes.substr(0, 20));
    expect_load_error(dir / "tiny.bin", {"file is 20 bytes, too short for a llama2.c checkpoint header"}, "tiny.bin");
}

TEST(BadInput, Llama2cInconsistentHeader) {
    test::TempDir dir;
    const std::string bytes = test::read_bytes(test::kStoriesBin);
    auto with_field = [&](int index, std::int32_t value) {
        std::string b = bytes;
        std::memcpy(b.data() + 4 * index, &value, 4);
        return b;
    };
    test::write_bytes(dir / "h.bin", with_field(2, 0));
    expect_load_error(dir / "h.bin", {"header field n_layers = 0 must be positive"}, "h.bin");
    test::write_bytes(dir / "h.bin", with_field(4, 3));
    expect_load_error(dir / "h.bin", {"n_heads = 8 is not divisible by n_kv_heads = 3"}, "h.bin");
    test::write_bytes(dir / "h.bin", with_field(3, 7));
    expect_load_error(dir / "h.bin", {"dim = 64 is not divisible by n_heads = 7"}, "h.bin");
    test::write_bytes(dir / "h.bin", with_field(1, 0x7fffffff));
    expect_load_error(dir / "h.bin", {"implies", "truncated"}, "h.bin");
    test::write_bytes(dir / "h.bin", with_field(0, 0x616b3432));
    expect_load_error(dir / "h.bin", {"versioned llama2.c export"}, "h.bin");
}

}  // namespace
}  // namespace kascade
