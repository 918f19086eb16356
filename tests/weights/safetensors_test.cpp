// tests/weights/safetensors_test.cpp: well-formed safetensors checkpoints: the writer's format, every dtype, unaligned
// F32 data, sharded models, Qwen2/Llama biases, tied and untied LM heads.
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/weights/model_weights.h"
#include "io/weights/safetensors.h"
#include "io/weights/safetensors_writer.h"
#include "io/weights/weight_storage.h"
#include "tiny_model.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

TEST(SafetensorsWriter, WritesTheReferenceLayout) {
    test::TempDir dir;
    const std::vector<float> a = {1.0f, -2.0f, 0.5f};
    const std::vector<float> b = {1.0f, 3.0f};
    write_safetensors(dir / "x.safetensors", {{"a", DType::BF16, {3}, a.data()}, {"b", DType::F32, {1, 2}, b.data()}});
    const std::string bytes = test::read_bytes(dir / "x.safetensors");
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    EXPECT_EQ(header_len % 8, 0u) << "the data region must start 8-byte aligned";
    ASSERT_EQ(bytes.size(), 8 + header_len + 3 * 2 + 2 * 4);
    const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
    EXPECT_EQ(header["__metadata__"]["format"], "pt");
    EXPECT_EQ(header["a"]["dtype"], "BF16");
    EXPECT_EQ(header["a"]["shape"], nlohmann::json({3}));
    EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({0, 6}));
    EXPECT_EQ(header["b"]["dtype"], "F32");
    EXPECT_EQ(header["b"]["shape"], nlohmann::json({1, 2}));
    EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({6, 14}));
    const char* data = bytes.data() + 8 + header_len;
    EXPECT_EQ(std::string(data, 6), std::string("\x80\x3f\x00\xc0\x00\x3f", 6));  // BF16 1, -2, 0.5 little-endian
    float b1 = 0;
    std::memcpy(&b1, data + 6 + 4, 4);
    EXPECT_EQ(b1, 3.0f);
    // Atomic: nothing but the file itself is left in the directory.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(SafetensorsWriter, RejectsDuplicateNames) {
    test::TempDir dir;
    const float v = 1.0f;
    const std::string msg = test::error_message([&] {
        write_safetensors(dir / "dup.safetensors", {{"a", DType::F32, {1}, &v}, {"a", DType::F32, {1}, &v}});
    });
    EXPECT_NE(msg.find("dup.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("duplicate"), std::string::npos) << msg;
    EXPECT_FALSE(std::filesystem::exists(dir / "dup.safetensors"));
}

class SafetensorsDtype : public ::testing::TestWithParam<DType> {};

TEST_P(SafetensorsDtype, TinyLlamaLoadsExactly) {
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write(dir.path(), GetParam());
    const ModelWeights w = load_model(dir.path());
    EXPECT_EQ(w.format, "safetensors");
    EXPECT_EQ(w.config.dim, 8);
    EXPECT_EQ(w.config.head_dim, 4);
    EXPECT_EQ(w.config.rope_theta, 500000.0f);
    EXPECT_EQ(w.config.bos_token_id, 3);
    EXPECT_EQ(w.config.eos_token_id, 4);  // the first of the list
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    test::expect_weights_equal(w, m);
    // Matrices are used in place from the mapping in every dtype; only F16/BF16 norm weights are converted to fp32,
    // one buffer each.
    std::size_t vectors = 0;
    for (const auto& [name, t] : m.tensors) vectors += t.shape.size() == 1;
    const auto* storage = static_cast<const WeightStorage*>(w.storage.get());
    EXPECT_EQ(storage->buffers.size(), GetParam() == DType::F32 ? 0u : vectors);
    EXPECT_EQ(w.embed.dtype, GetParam());
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SafetensorsDtype, ::testing::Values(DType::F32, DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Safetensors, UnalignedF32IsCopied) {
    // A header of 8k+1 bytes puts the data region at an odd address; the values must still load exactly.
    test::TempDir dir;
    const float values[3] = {1.5f, -0.25f, 3e-8f};
    std::string header = R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
    while (header.size() % 4 != 1) header += ' ';
    ASSERT_EQ(header.size() % 4, 1u);
    test::write_bytes(dir / "odd.safetensors",
                      test::safetensors_bytes(header, std::string(reinterpret_cast<const char*>(values), 12)));
    const SafetensorsFile file(dir / "odd.safetensors");
    const SafetensorsTensor* t = file.find("t");
    ASSERT_NE(t, nullptr);
    EXPECT_NE(reinterpret_cast<std::uintptr_t>(t->data) % 4, 0u);
    EXPECT_EQ(t->shape, (std::vector<std::int64_t>{3}));
    EXPECT_EQ(t->numel(), 3u);

    // The same through load_model: a tiny model whose header length is not a multiple of 4.
    const test::TinyModel m = test::make_tiny_model("llama", false, false, false);
    m.write(dir.path(), DType::F32);
    std::string bytes = test::read_bytes(dir / "model.safetensors");
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, bytes.data(), 8);
    const std::string padded_header = bytes.substr(8, header_len) + "     ";  // JSON allows trailing whitespace
    ASSERT_NE(padded_header.size() % 4, 0u);
    test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(padded_header, bytes.substr(8 + header_len)));
    const ModelWeights w = load_model(dir.path());
    test::expect_weights_equal(w, m);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(w.embed.data) % alignof(float), 0u);
    EXPECT_EQ(static_cast<const WeightStorage*>(w.storage.get())->buffers.size(), m.tensors.size());
}

TEST(Safetensors, ShardedModelWithIndex) {
    // Shard 1 holds the embedding and layer 0 as F32, shard 2 everything else as BF16.
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("llama", false, false, true);
    m.write_config(dir.path());
    std::vector<SafetensorsWriteTensor> shard1, shard2;
    nlohmann::json weight_map;
    for (const auto& [name, t] : m.tensors) {
        const bool first = name == "model.embed_tokens.weight" || name.starts_with("model.layers.0.");
        (first ? shard1 : shard2).push_back({name, first ? DType::F32 : DType::BF16, t.shape, t.values.data()});
        weight_map[name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors(dir / "model-00001-of-00002.safetensors", shard1);
    write_safetensors(dir / "model-00002-of-00002.safetensors", shard2);
    test::write_bytes(dir / "model.safetensors.index.json",
                      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump(2));
    const ModelWeights w = load_model(dir.path());
    EXPECT_EQ(w.source, dir / "model.safetensors.index.json");
    EXPECT_FALSE(w.config.tie_word_embeddings);
    ASSERT_NE(w.lm_head.data, w.embed.data);
    test::expect_weights_equal(w, m);

    // The index file itself is also accepted as the path.
    test::expect_weights_equal(load_model(dir / "model.safetensors.index.json"), m);
}

TEST(Safetensors, Qwen2LoadsQkvBiasesByDefault) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("qwen2", true, false, false);
    ASSERT_FALSE(m.config.contains("attention_bias"));
    m.write(dir.path(), DType::BF16);
    const ModelWeights w = load_model(dir.path());
    EXPECT_TRUE(w.config.attention_bias);
    ASSERT_NE(w.layers[1].bq, nullptr);
    ASSERT_NE(w.layers[1].bk, nullptr);
    ASSERT_NE(w.layers[1].bv, nullptr);
    EXPECT_EQ(w.layers[1].bo, nullptr);
    EXPECT_EQ(w.layers[1].bk[3], m.tensors.at("model.layers.1.self_attn.k_proj.bias").values[3]);
    test::expect_weights_equal(w, m);
}

TEST(Safetensors, LlamaAttentionBiasIncludesOProj) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", true, true, false);
    m.config["attention_bias"] = true;
    m.write(dir.path(), DType::F32);
    const ModelWeights w = load_model(dir.path());
    ASSERT_NE(w.layers[0].bo, nullptr);
    test::expect_weights_equal(w, m);
}

TEST(Safetensors, UntiedHeadLoadsLmHead) {
    test::TempDir dir;
    const test::TinyModel m = test::make_tiny_model("mistral", false, false, true);
    m.write(dir.path(), DType::F16);
    const ModelWeights w = load_model(dir / "model.safetensors");
    EXPECT_EQ(w.config.model_type, "mistral");
    ASSERT_NE(w.lm_head.data, w.embed.data);
    EXPECT_EQ(test::matrix_values(w.lm_head)[5], m.tensors.at("lm_head.weight").values[5]);
    test::expect_weights_equal(w, m);
}

TEST(Safetensors, TiedModelIgnoresARedundantLmHead) {
    test::TempDir dir;
    test::TinyModel m = test::make_tiny_model("llama", false, false, true);
    m.config["tie_word_embeddings"] = true;
    m.write(dir.path(), DType::F32);
    const ModelWeights w = load_model(dir.path());
    EXPECT_EQ(w.lm_head.data, w.embed.data);
}

TEST(Safetensors, MetadataAndEmptyTensorsAreAccepted) {
    test::TempDir dir;
    const float v[2] = {1.0f, 2.0f};
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"e":{"dtype":"BF16","shape":[0,4],"data_offsets":[8,8]},)"
        R"("v":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    test::write_bytes(dir / "m.safetensors",
                      test::safetensors_bytes(header, std::string(reinterpret_cast<const char*>(v), 8)));
    const SafetensorsFile file(dir / "m.safetensors");
    EXPECT_EQ(file.tensors().size(), 2u);
    EXPECT_EQ(file.find("e")->numel(), 0u);
    EXPECT_EQ(file.find("__metadata__"), nullptr);
}

}  // namespace
}  // namespace kascade
