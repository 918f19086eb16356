// io/weights/hf_checkpoint.cpp: mapping Hugging Face tensor names onto ModelWeights, with shape checks.
#include "io/weights/hf_checkpoint.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "io/weights/dtype.h"
#include "io/weights/safetensors.h"
#include "io/weights/weight_storage.h"

namespace kascade {
namespace {

// Looks tensors up by name, checks their shape against the config and places them (weight_storage.h).
class TensorFetcher {
  public:
    TensorFetcher(const SafetensorsSet& set, const std::filesystem::path& config_json, WeightPlacement& placement)
        : set_(set), config_name_(config_json.filename().string()), placement_(placement) {}

    /// Every tensor of the file that no vector() or matrix() call took, except those a loader may ignore.
    std::vector<std::string> unused(bool tied) const {
        std::vector<std::string> names;
        for (const auto& [name, tensor] : set_.tensors()) {
            if (used_.count(name)) continue;
            if (tied && name == "lm_head.weight") continue;       // a redundant copy of the tied embedding
            if (name.ends_with("rotary_emb.inv_freq")) continue;  // RoPE frequencies old checkpoints saved
            names.push_back(name);
        }
        return names;
    }

    /// A norm weight or bias, as fp32.
    const float* vector(const std::string& name, std::int64_t size) {
        const SafetensorsTensor& t = find(name, {size});
        return placement_.vector(t.dtype, t.data, t.numel());
    }

    /// A [rows][cols] weight matrix.
    WeightMatrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        const SafetensorsTensor& t = find(name, {rows, cols});
        return placement_.matrix(t.dtype, t.data, static_cast<int>(rows), static_cast<int>(cols));
    }

  private:
    const SafetensorsTensor& find(const std::string& name, const std::vector<std::int64_t>& expected_shape) {
        used_.insert(name);
        const SafetensorsTensor* tensor = set_.find(name);
        KASCADE_CHECK(tensor != nullptr, "{}: tensor {} is missing ({} implies shape {})", set_.path().string(), name,
                      config_name_, shape_string(expected_shape));
        KASCADE_CHECK(tensor->shape == expected_shape, "{}: tensor {} has shape {}, {} implies {}",
                      tensor->file->string(), name, shape_string(tensor->shape), config_name_,
                      shape_string(expected_shape));
        // A NaN or infinity in a weight is refused here, wherever it sits: the attention kernels would turn a
        // non-finite score into a finite probability and a broken checkpoint would give a plausible perplexity.
        const std::size_t bad = first_non_finite(tensor->dtype, tensor->data, tensor->numel());
        KASCADE_CHECK(bad == tensor->numel(), "{}: tensor {} holds a non-finite value (NaN or infinity) at element {}",
                      tensor->file->string(), name, bad);
        return *tensor;
    }

    const SafetensorsSet& set_;
    std::string config_name_;
    WeightPlacement& placement_;
    std::set<std::string> used_;
};

}  // namespace

ModelWeights load_hf_checkpoint(const std::filesystem::path& config_json, const std::filesystem::path& weights,
                                const LoadOptions& options) {
    ModelWeights w;
    w.config = load_hf_config(config_json);
    const ModelConfig& c = w.config;
    auto set = std::make_shared<SafetensorsSet>(weights);
    auto storage = std::make_shared<WeightStorage>();
    storage->sources.push_back(set);
    WeightPlacement placement(*storage, options.weights_dtype);
    TensorFetcher fetch(*set, config_json, placement);

    const std::int64_t dim = c.dim;
    const std::int64_t hidden = c.hidden_dim;
    const std::int64_t q_rows = static_cast<std::int64_t>(c.n_heads) * c.head_dim;
    const std::int64_t kv_rows = static_cast<std::int64_t>(c.n_kv_heads) * c.head_dim;
    // Qwen2 has biases on q/k/v only; HF Llama's attention_bias also puts one on o_proj.
    const bool o_bias = c.attention_bias && c.model_type != "qwen2";

    w.embed = fetch.matrix("model.embed_tokens.weight", c.vocab_size, dim);
    w.layers.resize(c.n_layers);
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights& l = w.layers[i];
        const std::string p = fmt::format("model.layers.{}.", i);
        l.attn_norm = fetch.vector(p + "input_layernorm.weight", dim);
        l.wq = fetch.matrix(p + "self_attn.q_proj.weight", q_rows, dim);
        l.wk = fetch.matrix(p + "self_attn.k_proj.weight", kv_rows, dim);
        l.wv = fetch.matrix(p + "self_attn.v_proj.weight", kv_rows, dim);
        l.wo = fetch.matrix(p + "self_attn.o_proj.weight", dim, q_rows);
        if (c.attention_bias) {
            l.bq = fetch.vector(p + "self_attn.q_proj.bias", q_rows);
            l.bk = fetch.vector(p + "self_attn.k_proj.bias", kv_rows);
            l.bv = fetch.vector(p + "self_attn.v_proj.bias", kv_rows);
        }
        if (o_bias) l.bo = fetch.vector(p + "self_attn.o_proj.bias", dim);
        if (c.qk_norm) {
            l.q_norm = fetch.vector(p + "self_attn.q_norm.weight", c.head_dim);
            l.k_norm = fetch.vector(p + "self_attn.k_norm.weight", c.head_dim);
        }
        l.mlp_norm = fetch.vector(p + "post_attention_layernorm.weight", dim);
        l.w_gate = fetch.matrix(p + "mlp.gate_proj.weight", hidden, dim);
        l.w_up = fetch.matrix(p + "mlp.up_proj.weight", hidden, dim);
        l.w_down = fetch.matrix(p + "mlp.down_proj.weight", dim, hidden);
    }
    w.final_norm = fetch.vector("model.norm.weight", dim);
    // Tied models share the embedding even if the file also carries a (redundant) lm_head.weight.
    KASCADE_CHECK(c.tie_word_embeddings || set->find("lm_head.weight") != nullptr,
                  "{}: tensor lm_head.weight is missing and {} has tie_word_embeddings = false", weights.string(),
                  config_json.filename().string());
    w.lm_head = c.tie_word_embeddings ? w.embed : fetch.matrix("lm_head.weight", c.vocab_size, dim);
    // A tensor the config does not account for means the config describes another model (fewer layers, no biases):
    // loading the rest would run a different network without a word.
    const std::vector<std::string> unused = fetch.unused(c.tie_word_embeddings);
    KASCADE_CHECK(unused.empty(),
                  "{}: {} tensor(s) are not used by the model {} describes, e.g. {} (num_hidden_layers = {}, "
                  "model_type {}): the config and the weights do not belong together",
                  weights.string(), unused.size(), config_json.filename().string(), unused.front(), c.n_layers,
                  c.model_type);
    placement.finish();
    w.weights_dtype = options.weights_dtype;

    w.source = weights;
    w.format = "safetensors";
    w.storage = storage;
    return w;
}

}  // namespace kascade
