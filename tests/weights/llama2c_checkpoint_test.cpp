// tests/weights/llama2c_checkpoint_test.cpp: the llama2.c loader on the real stories260K.bin, checked against bytes
// read independently at offsets computed here from the format description.
#include <cstdint>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "common/shared_files.h"
#include "io/weights/llama2c_checkpoint.h"
#include "io/weights/model_weights.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

// stories260K dimensions, from its README.
constexpr std::int64_t kDim = 64, kHidden = 172, kLayers = 5, kHeads = 8, kKvHeads = 4, kVocab = 512, kSeq = 512;
constexpr std::int64_t kHs = kDim / kHeads;
constexpr std::int64_t kHeaderBytes = 28;

// The float at element index `index` of the weight region, read with plain file I/O.
float float_at(std::int64_t index) {
    std::ifstream in(test::kStoriesBin, std::ios::binary);
    in.seekg(kHeaderBytes + index * 4);
    float v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    EXPECT_TRUE(in.good()) << "index " << index;
    return v;
}

// Element offsets of each section, in llama2.c's run.c order.
constexpr std::int64_t kEmbed = 0;
constexpr std::int64_t kRmsAtt = kEmbed + kVocab * kDim;
constexpr std::int64_t kWq = kRmsAtt + kLayers * kDim;
constexpr std::int64_t kWk = kWq + kLayers * kDim * kHeads * kHs;
constexpr std::int64_t kWv = kWk + kLayers * kDim * kKvHeads * kHs;
constexpr std::int64_t kWo = kWv + kLayers * kDim * kKvHeads * kHs;
constexpr std::int64_t kRmsFfn = kWo + kLayers * kHeads * kHs * kDim;
constexpr std::int64_t kW1 = kRmsFfn + kLayers * kDim;
constexpr std::int64_t kW2 = kW1 + kLayers * kHidden * kDim;
constexpr std::int64_t kW3 = kW2 + kLayers * kDim * kHidden;
constexpr std::int64_t kRmsFinal = kW3 + kLayers * kHidden * kDim;
constexpr std::int64_t kEnd = kRmsFinal + kDim + 2 * kSeq * kHs / 2;

TEST(Llama2cCheckpoint, Stories260KConfig) {
    ASSERT_EQ(std::filesystem::file_size(test::kStoriesBin), static_cast<std::uintmax_t>(kHeaderBytes + 4 * kEnd));
    const ModelWeights w = load_model(test::kStoriesBin);
    const ModelConfig& c = w.config;
    EXPECT_EQ(c.model_type, "llama2c");
    EXPECT_EQ(c.dim, 64);
    EXPECT_EQ(c.hidden_dim, 172);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.vocab_size, 512);
    EXPECT_EQ(c.max_seq_len, 512);
    EXPECT_EQ(c.rope_theta, 10000.0f);
    EXPECT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);
    EXPECT_EQ(c.rope_layout, RopeLayout::Interleaved);
    EXPECT_EQ(w.format, "llama2c");
    EXPECT_EQ(w.source, test::kStoriesBin);
    EXPECT_EQ(w.layers.size(), 5u);
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    for (const LayerWeights& l : w.layers) {
        EXPECT_EQ(l.bq, nullptr);
        EXPECT_EQ(l.bk, nullptr);
        EXPECT_EQ(l.bv, nullptr);
        EXPECT_EQ(l.bo, nullptr);
    }
}

TEST(Llama2cCheckpoint, Stories260KWeightsAtIndependentOffsets) {
    const ModelWeights w = load_llama2c_checkpoint(test::kStoriesBin);
    EXPECT_EQ(test::f32_data(w.embed)[5 * kDim + 7], float_at(kEmbed + 5 * kDim + 7));
    EXPECT_EQ(test::f32_data(w.embed)[511 * kDim + 63], float_at(kEmbed + 511 * kDim + 63));
    EXPECT_EQ(w.layers[3].attn_norm[11], float_at(kRmsAtt + 3 * kDim + 11));
    EXPECT_EQ(test::f32_data(w.layers[2].wq)[3 * kDim + 9], float_at(kWq + 2 * kDim * kDim + 3 * kDim + 9));
    EXPECT_EQ(test::f32_data(w.layers[4].wk)[31 * kDim + 63], float_at(kWk + 4 * 32 * kDim + 31 * kDim + 63));
    EXPECT_EQ(test::f32_data(w.layers[1].wv)[17 * kDim + 2], float_at(kWv + 1 * 32 * kDim + 17 * kDim + 2));
    EXPECT_EQ(test::f32_data(w.layers[0].wo)[63 * kDim + 1], float_at(kWo + 63 * kDim + 1));
    EXPECT_EQ(w.layers[2].mlp_norm[0], float_at(kRmsFfn + 2 * kDim));
    EXPECT_EQ(test::f32_data(w.layers[3].w_gate)[171 * kDim + 5], float_at(kW1 + 3 * kHidden * kDim + 171 * kDim + 5));
    EXPECT_EQ(test::f32_data(w.layers[4].w_down)[10 * kHidden + 100],
              float_at(kW2 + 4 * kDim * kHidden + 10 * kHidden + 100));
    EXPECT_EQ(test::f32_data(w.layers[1].w_up)[0], float_at(kW3 + 1 * kHidden * kDim));
    EXPECT_EQ(w.final_norm[63], float_at(kRmsFinal + 63));
    // Norm weights of a trained model are O(1) and not all equal: a cheap guard against reading the wrong section.
    EXPECT_GT(w.final_norm[0], 0.1f);
    EXPECT_NE(w.final_norm[0], w.final_norm[1]);
}

TEST(Llama2cCheckpoint, UnsharedClassifierIsReadFromTheEnd) {
    // Rewrite stories260K with vocab_size negated and a distinct wcls appended (the embedding times -1).
    test::TempDir dir;
    std::string bytes = test::read_bytes(test::kStoriesBin);
    std::int32_t vocab = -kVocab;
    std::memcpy(bytes.data() + 5 * 4, &vocab, 4);
    std::string wcls = bytes.substr(kHeaderBytes, kVocab * kDim * 4);
    for (std::size_t i = 3; i < wcls.size(); i += 4) wcls[i] = static_cast<char>(wcls[i] ^ 0x80);  // flip sign bits
    test::write_bytes(dir / "untied.bin", bytes + wcls);
    const ModelWeights w = load_model(dir / "untied.bin");
    EXPECT_FALSE(w.config.tie_word_embeddings);
    EXPECT_EQ(w.config.vocab_size, 512);
    ASSERT_NE(w.lm_head.data, w.embed.data);
    EXPECT_EQ(test::f32_data(w.lm_head)[7 * kDim + 3], -test::f32_data(w.embed)[7 * kDim + 3]);
    EXPECT_EQ(test::f32_data(w.lm_head)[511 * kDim + 63], -test::f32_data(w.embed)[511 * kDim + 63]);
}

}  // namespace
}  // namespace kascade
