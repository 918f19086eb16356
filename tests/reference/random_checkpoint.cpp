// tests/reference/random_checkpoint.cpp: random checkpoints and their naive twins (random_checkpoint.h).
#include "reference/random_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "base/bf16.h"

namespace naive {
namespace {

/// Writes tensors as one BF16 safetensors file and keeps the rounded values for the naive model.
class Bf16SafetensorsWriter {
  public:
    /// Values center + spread * U[-1, 1), rounded to BF16.
    Weights add(const std::string& name, std::vector<int64_t> shape, double center, double spread, UniformSource& rng) {
        size_t count = 1;
        for (int64_t d : shape) count *= static_cast<size_t>(d);
        Weights values(count);
        const size_t offset = data_.size();
        data_.resize(offset + count * 2);
        for (size_t i = 0; i < count; ++i) {
            const uint16_t b = kascade::bf16_from_float(static_cast<float>(center + spread * rng.next()));
            std::memcpy(data_.data() + offset + i * 2, &b, 2);
            values[i] = kascade::float_from_bf16(b);
        }
        header_[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, data_.size()}}};
        return values;
    }

    void write(const std::filesystem::path& path) const {
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

/// The rope_scaling frequencies of Hugging Face's modeling_rope_utils (default, linear, llama3, yarn), written out
/// from its definitions. Sets m.rope_inv_freq and m.rope_attention_factor.
void set_rope_from_config(Model& m, const nlohmann::json& config) {
    const int d = m.head_dim;
    std::vector<double> f(d / 2);
    for (int j = 0; j < d / 2; ++j) f[j] = 1.0 / std::pow(m.rope_theta, (2.0 * j) / d);
    m.rope_attention_factor = 1.0;
    const nlohmann::json rs = config.value("rope_scaling", nlohmann::json());
    const std::string type = rs.is_object() ? rs.value("rope_type", rs.value("type", "default")) : "default";
    if (type == "linear") {
        for (double& x : f) x /= rs["factor"].get<double>();
    } else if (type == "llama3") {
        const double factor = rs["factor"], lo = rs["low_freq_factor"], hi = rs["high_freq_factor"];
        const double old_ctx = rs["original_max_position_embeddings"];
        for (double& x : f) {
            const double wavelen = 2 * std::numbers::pi / x;
            if (wavelen > old_ctx / lo) {
                x = x / factor;
            } else if (wavelen >= old_ctx / hi) {
                const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
                x = (1 - smooth) * x / factor + smooth * x;
            }
        }
    } else if (type == "yarn") {
        const double max_pos = config["max_position_embeddings"];
        const double orig = rs.value("original_max_position_embeddings", max_pos);
        const double factor = rs.value("factor", max_pos / orig);
        const double beta_fast = rs.value("beta_fast", 32.0), beta_slow = rs.value("beta_slow", 1.0);
        auto correction_dim = [&](double rotations) {
            return d * std::log(orig / (rotations * 2 * std::numbers::pi)) / (2 * std::log(m.rope_theta));
        };
        double low = std::max(std::floor(correction_dim(beta_fast)), 0.0);
        double high = std::min(std::ceil(correction_dim(beta_slow)), d - 1.0);
        if (low == high) high += 0.001;
        for (int j = 0; j < d / 2; ++j) {
            const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
            f[j] = (f[j] / factor) * ramp + f[j] * (1 - ramp);
        }
        m.rope_attention_factor = rs.contains("attention_factor") ? rs["attention_factor"].get<double>()
                                                                  : (factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1);
    }
    m.rope_inv_freq = f;
}

/// Sliding windows as Hugging Face's Mistral / Qwen2 / Qwen3 configs define them (Llama has none).
void set_windows_from_config(Model& m, const nlohmann::json& config) {
    const std::string type = config["model_type"];
    const int window =
        config.value("sliding_window", nlohmann::json()).is_number() ? config["sliding_window"].get<int>() : 0;
    for (int l = 0; l < m.n_layers; ++l) {
        int w = 0;
        if (type == "mistral") {
            w = window;
        } else if ((type == "qwen2" || type == "qwen3") && config.value("use_sliding_window", false) &&
                   l >= config.value("max_window_layers", 28)) {
            w = window;
        }
        m.layers[l].window = w;
    }
}

}  // namespace

Model write_random_checkpoint(const nlohmann::json& config, const std::filesystem::path& dir, uint64_t seed) {
    Model m;
    m.dim = config["hidden_size"];
    m.hidden = config["intermediate_size"];
    m.n_layers = config["num_hidden_layers"];
    m.n_heads = config["num_attention_heads"];
    m.n_kv_heads = config.value("num_key_value_heads", nlohmann::json()).is_number()
                       ? config["num_key_value_heads"].get<int>()
                       : m.n_heads;
    m.head_dim =
        config.value("head_dim", nlohmann::json()).is_number() ? config["head_dim"].get<int>() : m.dim / m.n_heads;
    m.vocab = config["vocab_size"];
    m.rope_theta = config.value("rope_theta", 10000.0);
    m.eps = config["rms_norm_eps"];
    set_rope_from_config(m, config);

    const std::string type = config["model_type"];
    const bool qkv_bias = config.value("attention_bias", type == "qwen2");
    const bool o_bias = qkv_bias && type != "qwen2";
    const bool qk_norm = type == "qwen3";
    const bool tied = config.value("tie_word_embeddings", false);

    UniformSource rng(seed);
    const double w = std::sqrt(3.0) * config.value("initializer_range", 0.02);
    Bf16SafetensorsWriter writer;
    const int64_t D = m.dim, H = m.hidden, QD = int64_t{m.n_heads} * m.head_dim,
                  KV = int64_t{m.n_kv_heads} * m.head_dim;
    m.embed = writer.add("model.embed_tokens.weight", {m.vocab, D}, 0, w, rng);
    m.layers.resize(m.n_layers);
    for (int l = 0; l < m.n_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        Layer& L = m.layers[l];
        L.attn_norm = writer.add(p + "input_layernorm.weight", {D}, 1.0, 0.1, rng);
        L.wq = writer.add(p + "self_attn.q_proj.weight", {QD, D}, 0, w, rng);
        L.wk = writer.add(p + "self_attn.k_proj.weight", {KV, D}, 0, w, rng);
        L.wv = writer.add(p + "self_attn.v_proj.weight", {KV, D}, 0, w, rng);
        L.wo = writer.add(p + "self_attn.o_proj.weight", {D, QD}, 0, w, rng);
        if (qkv_bias) {
            L.bq = writer.add(p + "self_attn.q_proj.bias", {QD}, 0, 0.5, rng);
            L.bk = writer.add(p + "self_attn.k_proj.bias", {KV}, 0, 0.5, rng);
            L.bv = writer.add(p + "self_attn.v_proj.bias", {KV}, 0, 0.5, rng);
        }
        if (o_bias) L.bo = writer.add(p + "self_attn.o_proj.bias", {D}, 0, 0.5, rng);
        if (qk_norm) {
            L.q_norm = writer.add(p + "self_attn.q_norm.weight", {m.head_dim}, 1.0, 0.5, rng);
            L.k_norm = writer.add(p + "self_attn.k_norm.weight", {m.head_dim}, 1.0, 0.5, rng);
        }
        L.mlp_norm = writer.add(p + "post_attention_layernorm.weight", {D}, 1.0, 0.1, rng);
        L.gate = writer.add(p + "mlp.gate_proj.weight", {H, D}, 0, w, rng);
        L.up = writer.add(p + "mlp.up_proj.weight", {H, D}, 0, w, rng);
        L.down = writer.add(p + "mlp.down_proj.weight", {D, H}, 0, w, rng);
    }
    m.final_norm = writer.add("model.norm.weight", {D}, 1.0, 0.1, rng);
    m.lm_head = tied ? m.embed : writer.add("lm_head.weight", {m.vocab, D}, 0, w, rng);
    set_windows_from_config(m, config);

    std::filesystem::create_directories(dir);
    writer.write(dir / "model.safetensors");
    std::ofstream(dir / "config.json") << config.dump(2);
    return m;
}

}  // namespace naive
