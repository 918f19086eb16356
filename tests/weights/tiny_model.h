// tests/weights/tiny_model.h: a tiny Llama-family model (config.json + tensors under HF names) built in memory, for
// writing well-formed and deliberately broken checkpoints. Values are multiples of 0.25 in [-32, 32], exact in F32,
// BF16 and F16, so every dtype must load them bit-exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/weights/model_weights.h"
#include "io/weights/safetensors_writer.h"
#include "weights_test_util.h"

namespace kascade::test {

struct TinyTensor {
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

struct TinyModel {
    nlohmann::json config;
    std::map<std::string, TinyTensor> tensors;

    /// Tensors in name order, converted to `dtype`, ready for write_safetensors.
    std::vector<SafetensorsWriteTensor> to_write(DType dtype) const {
        std::vector<SafetensorsWriteTensor> out;
        for (const auto& [name, t] : tensors) out.push_back({name, dtype, t.shape, t.values.data()});
        return out;
    }

    void write_config(const std::filesystem::path& dir) const { write_bytes(dir / "config.json", config.dump(2)); }

    /// config.json + model.safetensors in `dir`.
    void write(const std::filesystem::path& dir, DType dtype) const {
        write_config(dir);
        write_safetensors(dir / "model.safetensors", to_write(dtype));
    }
};

/// dim 8, MLP 12, 2 layers, 2 query heads sharing 1 KV head (head_dim 4), vocab 16.
/// qkv_bias / o_bias add the bias tensors; untied adds lm_head.weight and sets tie_word_embeddings false.
inline TinyModel make_tiny_model(const std::string& model_type, bool qkv_bias, bool o_bias, bool untied) {
    constexpr std::int64_t dim = 8, hidden = 12, layers = 2, heads = 2, kv_heads = 1, head_dim = 4, vocab = 16;
    TinyModel m;
    m.config = {{"model_type", model_type},
                {"hidden_size", dim},
                {"intermediate_size", hidden},
                {"num_hidden_layers", layers},
                {"num_attention_heads", heads},
                {"num_key_value_heads", kv_heads},
                {"vocab_size", vocab},
                {"max_position_embeddings", 32},
                {"rms_norm_eps", 1e-6},
                {"rope_theta", 500000.0},
                {"tie_word_embeddings", !untied},
                {"bos_token_id", 3},
                {"eos_token_id", {4, 5}}};
    int seed = 0;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
        std::int64_t n = 1;
        for (std::int64_t d : shape) n *= d;
        TinyTensor t{std::move(shape), std::vector<float>(static_cast<std::size_t>(n))};
        seed += 13;
        for (std::int64_t i = 0; i < n; ++i) t.values[i] = static_cast<float>((seed + 7 * i) % 255 - 127) * 0.25f;
        m.tensors[name] = std::move(t);
    };
    add("model.embed_tokens.weight", {vocab, dim});
    for (int l = 0; l < layers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        add(p + "input_layernorm.weight", {dim});
        add(p + "self_attn.q_proj.weight", {heads * head_dim, dim});
        add(p + "self_attn.k_proj.weight", {kv_heads * head_dim, dim});
        add(p + "self_attn.v_proj.weight", {kv_heads * head_dim, dim});
        add(p + "self_attn.o_proj.weight", {dim, heads * head_dim});
        if (qkv_bias) {
            add(p + "self_attn.q_proj.bias", {heads * head_dim});
            add(p + "self_attn.k_proj.bias", {kv_heads * head_dim});
            add(p + "self_attn.v_proj.bias", {kv_heads * head_dim});
        }
        if (o_bias) add(p + "self_attn.o_proj.bias", {dim});
        add(p + "post_attention_layernorm.weight", {dim});
        add(p + "mlp.gate_proj.weight", {hidden, dim});
        add(p + "mlp.up_proj.weight", {hidden, dim});
        add(p + "mlp.down_proj.weight", {dim, hidden});
    }
    add("model.norm.weight", {dim});
    if (untied) add("lm_head.weight", {vocab, dim});
    return m;
}

/// Every tensor of `w` under its HF tensor name, as fp32 values (the 1-D ones as long as m says).
inline std::map<std::string, std::vector<float>> named_values(const ModelWeights& w, const TinyModel& m) {
    std::map<std::string, std::vector<float>> out;
    auto put_vector = [&](const std::string& name, const float* p) {
        if (p == nullptr) return;
        auto it = m.tensors.find(name);
        const std::size_t n = it == m.tensors.end() ? 0 : it->second.values.size();
        out[name] = std::vector<float>(p, p + n);
    };
    auto put_matrix = [&](const std::string& name, const WeightMatrix& x) {
        if (x.data != nullptr) out[name] = matrix_values(x);
    };
    put_matrix("model.embed_tokens.weight", w.embed);
    for (std::size_t l = 0; l < w.layers.size(); ++l) {
        const LayerWeights& L = w.layers[l];
        const std::string p = fmt::format("model.layers.{}.", l);
        put_vector(p + "input_layernorm.weight", L.attn_norm);
        put_matrix(p + "self_attn.q_proj.weight", L.wq);
        put_matrix(p + "self_attn.k_proj.weight", L.wk);
        put_matrix(p + "self_attn.v_proj.weight", L.wv);
        put_matrix(p + "self_attn.o_proj.weight", L.wo);
        put_vector(p + "self_attn.q_proj.bias", L.bq);
        put_vector(p + "self_attn.k_proj.bias", L.bk);
        put_vector(p + "self_attn.v_proj.bias", L.bv);
        put_vector(p + "self_attn.o_proj.bias", L.bo);
        put_vector(p + "post_attention_layernorm.weight", L.mlp_norm);
        put_matrix(p + "mlp.gate_proj.weight", L.w_gate);
        put_matrix(p + "mlp.up_proj.weight", L.w_up);
        put_matrix(p + "mlp.down_proj.weight", L.w_down);
    }
    put_vector("model.norm.weight", w.final_norm);
    if (w.lm_head.data != w.embed.data) put_matrix("lm_head.weight", w.lm_head);
    return out;
}

/// Checks that `w` holds exactly the tensors of `m`, value for value.
inline void expect_weights_equal(const ModelWeights& w, const TinyModel& m) {
    const auto values = named_values(w, m);
    EXPECT_EQ(values.size(), m.tensors.size());
    for (const auto& [name, t] : m.tensors) {
        auto it = values.find(name);
        if (it == values.end()) {
            ADD_FAILURE() << name << " was not loaded";
            continue;
        }
        ASSERT_EQ(it->second.size(), t.values.size()) << name;
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < t.values.size(); ++i) mismatches += it->second[i] != t.values[i];
        EXPECT_EQ(mismatches, 0u) << name;
    }
}

}  // namespace kascade::test
