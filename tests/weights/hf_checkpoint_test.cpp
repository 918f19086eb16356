// tests/weights/hf_checkpoint_test.cpp: the Hugging Face stories260K directory against the llama2.c original. The HF
// copy permuted the q/k rows from interleaved to rotate_half RoPE; undoing that permutation here and finding every
// weight equal checks both loaders at once.
#include <cstdint>

#include <gtest/gtest.h>

#include "common/shared_files.h"
#include "io/weights/model_weights.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

const std::filesystem::path kHfDir = test::shared_dir() / "models/stories260K-hf";

// HF's convert_llama_weights_to_hf.py permute(w, n_heads): w.view(n_heads, hs/2, 2, dim).transpose(1, 2).reshape(...),
// i.e. HF row (head h, half j, i) holds Meta row (head h, pair i, j): hf[h*hs + j*hs/2 + i] = meta[h*hs + 2*i + j].
std::int64_t meta_row_of_hf_row(std::int64_t hf_row, std::int64_t head_size) {
    const std::int64_t head = hf_row / head_size;
    const std::int64_t r = hf_row % head_size;
    const std::int64_t j = r / (head_size / 2);
    const std::int64_t i = r % (head_size / 2);
    return head * head_size + 2 * i + j;
}

void expect_equal(const float* a, const float* b, std::int64_t n, const std::string& what) {
    std::int64_t mismatches = 0;
    for (std::int64_t k = 0; k < n; ++k) mismatches += a[k] != b[k];
    EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " of " << n << " values differ";
}

void expect_rows_permuted(const float* hf, const float* meta, std::int64_t rows, std::int64_t cols,
                          std::int64_t head_size, const std::string& what) {
    std::int64_t mismatches = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* meta_row = meta + meta_row_of_hf_row(r, head_size) * cols;
        for (std::int64_t c = 0; c < cols; ++c) mismatches += hf[r * cols + c] != meta_row[c];
    }
    EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " values differ after undoing the RoPE permutation";
}

TEST(HfCheckpoint, Stories260KDirectoryMatchesLlama2c) {
    const ModelWeights hf = load_model(kHfDir);
    const ModelWeights meta = load_model(test::kStoriesBin);
    const ModelConfig& c = hf.config;
    EXPECT_EQ(c.model_type, "llama");
    EXPECT_EQ(hf.format, "safetensors");
    EXPECT_EQ(c.rope_layout, RopeLayout::RotateHalf);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_EQ(hf.lm_head.data, hf.embed.data);
    EXPECT_FALSE(c.attention_bias);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_EQ(c.eos_token_id, 2);
    for (auto [a, b] : {std::pair{c.dim, meta.config.dim},
                        {c.hidden_dim, meta.config.hidden_dim},
                        {c.n_layers, meta.config.n_layers},
                        {c.n_heads, meta.config.n_heads},
                        {c.n_kv_heads, meta.config.n_kv_heads},
                        {c.head_dim, meta.config.head_dim},
                        {c.vocab_size, meta.config.vocab_size},
                        {c.max_seq_len, meta.config.max_seq_len}}) {
        EXPECT_EQ(a, b);
    }
    EXPECT_EQ(c.rope_theta, meta.config.rope_theta);
    EXPECT_EQ(c.rms_norm_eps, meta.config.rms_norm_eps);

    const std::int64_t dim = c.dim, hidden = c.hidden_dim, hs = c.head_dim;
    const std::int64_t q_rows = c.n_heads * hs, kv_rows = c.n_kv_heads * hs;
    expect_equal(test::f32_data(hf.embed), test::f32_data(meta.embed), c.vocab_size * dim, "embed");
    expect_equal(hf.final_norm, meta.final_norm, dim, "final_norm");
    for (int i = 0; i < c.n_layers; ++i) {
        const LayerWeights& h = hf.layers[i];
        const LayerWeights& m = meta.layers[i];
        const std::string layer = "layer " + std::to_string(i) + " ";
        expect_equal(h.attn_norm, m.attn_norm, dim, layer + "attn_norm");
        expect_rows_permuted(test::f32_data(h.wq), test::f32_data(m.wq), q_rows, dim, hs, layer + "wq");
        expect_rows_permuted(test::f32_data(h.wk), test::f32_data(m.wk), kv_rows, dim, hs, layer + "wk");
        expect_equal(test::f32_data(h.wv), test::f32_data(m.wv), kv_rows * dim, layer + "wv");
        expect_equal(test::f32_data(h.wo), test::f32_data(m.wo), dim * q_rows, layer + "wo");
        expect_equal(h.mlp_norm, m.mlp_norm, dim, layer + "mlp_norm");
        expect_equal(test::f32_data(h.w_gate), test::f32_data(m.w_gate), hidden * dim, layer + "w_gate");
        expect_equal(test::f32_data(h.w_up), test::f32_data(m.w_up), hidden * dim, layer + "w_up");
        expect_equal(test::f32_data(h.w_down), test::f32_data(m.w_down), dim * hidden, layer + "w_down");
    }
    // The permutation is not the identity, so the comparison above really tests it.
    EXPECT_NE(test::f32_data(hf.layers[0].wq)[1 * dim], test::f32_data(meta.layers[0].wq)[1 * dim]);
}

TEST(HfCheckpoint, SafetensorsFileWithConfigBeside) {
    const ModelWeights w = load_model(kHfDir / "model.safetensors");
    EXPECT_EQ(w.config.n_layers, 5);
    EXPECT_EQ(w.source, kHfDir / "model.safetensors");
}

}  // namespace
}  // namespace kascade
