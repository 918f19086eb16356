// io/weights/random_checkpoint.cpp: write_random_checkpoint.
#include "io/weights/random_checkpoint.h"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/file_util.h"
#include "io/weights/model_config.h"
#include "io/weights/safetensors_writer.h"

namespace kascade {
namespace {

/// A counter-based generator: element i of a tensor is a pure function of (seed, tensor, i), so chunks can be made
/// in any order and in parallel.
float uniform_at(std::uint64_t seed, std::uint64_t tensor, std::uint64_t i) {
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + tensor * 0xD1B54A32D192ED03ull + i;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);  // [-1, 1)
}

/// initializer_range of config.json, 0.02 when absent: what the weights' spread is made from.
double initializer_range(const nlohmann::json& config, const std::filesystem::path& config_json) {
    const auto it = config.find("initializer_range");
    if (it == config.end()) return 0.02;
    KASCADE_CHECK(it->is_number() && std::isfinite(it->get<double>()) && it->get<double>() > 0,
                  "{}: field \"initializer_range\" must be a positive number, found {}", config_json.string(),
                  it->dump());
    return it->get<double>();
}

}  // namespace

void write_random_checkpoint(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                             const RandomCheckpointOptions& options) {
    ModelConfig c = load_hf_config(config_json);  // checks the config and decides the family's tensors
    nlohmann::json config = nlohmann::json::parse(read_file(config_json));
    if (options.layers > 0) {
        config["num_hidden_layers"] = options.layers;
        c.n_layers = options.layers;
    }

    const double spread = std::sqrt(3.0) * initializer_range(config, config_json);
    std::vector<SafetensorsWriteTensor> tensors;
    auto add = [&](std::string name, std::vector<std::int64_t> shape, float center, float half_width) {
        const std::uint64_t index = tensors.size();
        const std::uint64_t seed = options.seed;
        auto fill = [seed, index, center, half_width](std::size_t first, std::size_t n, float* out) {
#pragma omp parallel for schedule(static) if (n >= (1u << 16))
            for (std::size_t i = 0; i < n; ++i) out[i] = center + half_width * uniform_at(seed, index, first + i);
        };
        tensors.push_back({std::move(name), options.dtype, std::move(shape), nullptr, fill});
    };
    const std::int64_t dim = c.dim, hidden = c.hidden_dim, q_rows = std::int64_t{c.n_heads} * c.head_dim,
                       kv_rows = std::int64_t{c.n_kv_heads} * c.head_dim;
    const float w = static_cast<float>(spread);
    add("model.embed_tokens.weight", {c.vocab_size, dim}, 0, w);
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        add(p + "input_layernorm.weight", {dim}, 1, 0.1f);
        add(p + "self_attn.q_proj.weight", {q_rows, dim}, 0, w);
        add(p + "self_attn.k_proj.weight", {kv_rows, dim}, 0, w);
        add(p + "self_attn.v_proj.weight", {kv_rows, dim}, 0, w);
        add(p + "self_attn.o_proj.weight", {dim, q_rows}, 0, w);
        if (c.attention_bias) {
            add(p + "self_attn.q_proj.bias", {q_rows}, 0, 0.02f);
            add(p + "self_attn.k_proj.bias", {kv_rows}, 0, 0.02f);
            add(p + "self_attn.v_proj.bias", {kv_rows}, 0, 0.02f);
            if (c.model_type != "qwen2") add(p + "self_attn.o_proj.bias", {dim}, 0, 0.02f);
        }
        if (c.qk_norm) {
            add(p + "self_attn.q_norm.weight", {c.head_dim}, 1, 0.1f);
            add(p + "self_attn.k_norm.weight", {c.head_dim}, 1, 0.1f);
        }
        add(p + "post_attention_layernorm.weight", {dim}, 1, 0.1f);
        add(p + "mlp.gate_proj.weight", {hidden, dim}, 0, w);
        add(p + "mlp.up_proj.weight", {hidden, dim}, 0, w);
        add(p + "mlp.down_proj.weight", {dim, hidden}, 0, w);
    }
    add("model.norm.weight", {dim}, 1, 0.1f);
    if (!c.tie_word_embeddings) add("lm_head.weight", {c.vocab_size, dim}, 0, w);
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    KASCADE_CHECK(!ec, "cannot create folder \"{}\": {}", out_dir.string(), ec.message());
    write_safetensors(out_dir / "model.safetensors", tensors);
    write_file_atomic(out_dir / "config.json", config.dump(2) + "\n");
}

}  // namespace kascade
