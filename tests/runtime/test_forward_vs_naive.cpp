// tests/runtime/test_forward_vs_naive.cpp: the runtime's logits against the independent double-precision forward
// in naive_llama.h, on the real stories260K weights (both file formats) and on a randomly initialised model with
// SmolLM2-135M's exact config.json written as BF16 safetensors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "io/weights/model_weights.h"
#include "naive_llama.h"
#include "pipeline/runtime/transformer.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

const fs::path kShared = KASCADE_SHARED_DIR;
constexpr double kMaxRelativeError = 1e-4;

/// max |runtime - naive| / max |naive| over all logits of all positions.
double relative_error(const std::vector<float>& runtime, const std::vector<std::vector<double>>& reference) {
    double max_diff = 0, max_ref = 0;
    const size_t vocab = reference[0].size();
    for (size_t t = 0; t < reference.size(); ++t) {
        for (size_t i = 0; i < vocab; ++i) {
            const double r = reference[t][i];
            EXPECT_TRUE(std::isfinite(runtime[t * vocab + i])) << "position " << t << " logit " << i;
            max_diff = std::max(max_diff, std::abs(runtime[t * vocab + i] - r));
            max_ref = std::max(max_ref, std::abs(r));
        }
    }
    return max_diff / max_ref;
}

/// Logits of every position from one prefill pass.
std::vector<float> runtime_prefill_logits(const ModelWeights& weights, const std::vector<int32_t>& tokens) {
    Transformer model(weights);
    DenseAttention attention;
    KvCache cache(weights.config, static_cast<int>(tokens.size()));
    const int n = static_cast<int>(tokens.size());
    std::vector<float> hidden(static_cast<size_t>(n) * weights.config.dim);
    std::vector<float> logits(static_cast<size_t>(n) * weights.config.vocab_size);
    model.forward(tokens, cache, attention, hidden.data());
    model.lm_head(hidden.data(), n, logits.data());
    return logits;
}

/// Logits of every position from a prefill of the first token and one decode step per further token.
std::vector<float> runtime_decode_logits(const ModelWeights& weights, const std::vector<int32_t>& tokens) {
    Transformer model(weights);
    DenseAttention attention;
    KvCache cache(weights.config, static_cast<int>(tokens.size()));
    const int vocab = weights.config.vocab_size;
    std::vector<float> hidden(weights.config.dim);
    std::vector<float> logits(tokens.size() * vocab);
    for (size_t t = 0; t < tokens.size(); ++t) {
        model.forward(std::span<const int32_t>(&tokens[t], 1), cache, attention, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data() + t * vocab);
    }
    return logits;
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
        std::vector<float> f(count);
        in.read(reinterpret_cast<char*>(f.data()), static_cast<std::streamsize>(count * sizeof(float)));
        return std::vector<double>(f.begin(), f.end());
    };
    const int L = m.n_layers, D = m.dim, H = m.hidden, KV = m.n_kv_heads * m.head_dim;
    m.embed = read(static_cast<size_t>(m.vocab) * D);
    m.layers.resize(L);
    auto per_layer = [&](std::vector<double> naive::Layer::*field, size_t count) {
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
    const fs::path bin = kShared / "models/stories260K/stories260K.bin";
    const naive::Model reference_model = read_llama2c_naively(bin);
    const auto tokens = test_tokens(40, reference_model.vocab, /*BOS=*/1, 7);
    const auto reference = naive::logits(reference_model, tokens);
    const ModelWeights weights = load_model(bin);
    EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
    EXPECT_LT(relative_error(runtime_decode_logits(weights, tokens), reference), kMaxRelativeError);
}

TEST(ForwardVsNaive, Stories260kHuggingFaceDirectory) {
    // The HF copy stores q/k rows permuted for rotate_half RoPE; the logits must still be those of the original.
    const naive::Model reference_model = read_llama2c_naively(kShared / "models/stories260K/stories260K.bin");
    const auto tokens = test_tokens(40, reference_model.vocab, /*BOS=*/1, 8);
    const auto reference = naive::logits(reference_model, tokens);
    const ModelWeights weights = load_model(kShared / "models/stories260K-hf");
    EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
}

// ---- a randomly initialised SmolLM2-135M-shaped model, BF16 safetensors ---------------------------------------------

uint16_t to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
    return static_cast<uint16_t>(bits >> 16);
}

double from_bf16(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

/// Writes tensors as a BF16 safetensors file with this test's own writer, and keeps the rounded values for the
/// naive model.
class Bf16SafetensorsWriter {
  public:
    std::vector<double> add(const std::string& name, std::vector<int64_t> shape, double mean, double stddev,
                            std::mt19937_64& rng) {
        size_t count = 1;
        for (int64_t d : shape) count *= static_cast<size_t>(d);
        std::normal_distribution<float> normal(static_cast<float>(mean), static_cast<float>(stddev));
        std::vector<double> values(count);
        const size_t offset = data_.size();
        data_.resize(offset + count * 2);
        for (size_t i = 0; i < count; ++i) {
            const uint16_t b = to_bf16(normal(rng));
            std::memcpy(data_.data() + offset + i * 2, &b, 2);
            values[i] = from_bf16(b);
        }
        header_[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, data_.size()}}};
        return values;
    }
    void write(const fs::path& path) const {
        std::string header = header_.dump();
        header.append((8 - header.size() % 8) % 8, ' ');
        const uint64_t n = header.size();
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(&n), 8);
        out.write(header.data(), static_cast<std::streamsize>(n));
        out.write(reinterpret_cast<const char*>(data_.data()), static_cast<std::streamsize>(data_.size()));
    }

  private:
    nlohmann::json header_ = nlohmann::json::object();
    std::vector<uint8_t> data_;
};

TEST(ForwardVsNaive, RandomSmolLM2ShapedModelFromBf16Safetensors) {
    const fs::path config_path = kShared / "models/smollm2-135m-tokenizer/config.json";
    const nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
    naive::Model m;
    m.dim = config["hidden_size"];
    m.hidden = config["intermediate_size"];
    m.n_layers = config["num_hidden_layers"];
    m.n_heads = config["num_attention_heads"];
    m.n_kv_heads = config["num_key_value_heads"];
    m.head_dim = m.dim / m.n_heads;
    m.vocab = config["vocab_size"];
    m.rope_theta = config["rope_theta"];
    m.eps = config["rms_norm_eps"];
    ASSERT_EQ(m.n_layers, 30);
    ASSERT_EQ(m.n_heads, 9);
    ASSERT_EQ(m.n_kv_heads, 3);
    ASSERT_TRUE(config["tie_word_embeddings"].get<bool>());

    std::mt19937_64 rng(2024);
    const double w_std = config["initializer_range"];
    Bf16SafetensorsWriter writer;
    const int64_t D = m.dim, H = m.hidden, QD = m.n_heads * m.head_dim, KV = m.n_kv_heads * m.head_dim;
    m.embed = writer.add("model.embed_tokens.weight", {m.vocab, D}, 0, w_std, rng);
    m.lm_head = m.embed;
    m.layers.resize(m.n_layers);
    for (int l = 0; l < m.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        naive::Layer& L = m.layers[l];
        L.attn_norm = writer.add(p + "input_layernorm.weight", {D}, 1.0, 0.1, rng);
        L.wq = writer.add(p + "self_attn.q_proj.weight", {QD, D}, 0, w_std, rng);
        L.wk = writer.add(p + "self_attn.k_proj.weight", {KV, D}, 0, w_std, rng);
        L.wv = writer.add(p + "self_attn.v_proj.weight", {KV, D}, 0, w_std, rng);
        L.wo = writer.add(p + "self_attn.o_proj.weight", {D, QD}, 0, w_std, rng);
        L.mlp_norm = writer.add(p + "post_attention_layernorm.weight", {D}, 1.0, 0.1, rng);
        L.gate = writer.add(p + "mlp.gate_proj.weight", {H, D}, 0, w_std, rng);
        L.up = writer.add(p + "mlp.up_proj.weight", {H, D}, 0, w_std, rng);
        L.down = writer.add(p + "mlp.down_proj.weight", {D, H}, 0, w_std, rng);
    }
    m.final_norm = writer.add("model.norm.weight", {D}, 1.0, 0.1, rng);

    const fs::path dir = fs::temp_directory_path() / ("kascade_smollm2_random_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    writer.write(dir / "model.safetensors");
    fs::copy_file(config_path, dir / "config.json", fs::copy_options::overwrite_existing);

    const auto tokens = test_tokens(9, m.vocab, /*BOS=*/1, 9);
    const auto reference = naive::logits(m, tokens);
    {
        const ModelWeights weights = load_model(dir);
        EXPECT_EQ(weights.config.n_layers, 30);
        EXPECT_LT(relative_error(runtime_prefill_logits(weights, tokens), reference), kMaxRelativeError);
        EXPECT_LT(relative_error(runtime_decode_logits(weights, tokens), reference), kMaxRelativeError);
    }
    fs::remove_all(dir);
}

}  // namespace
