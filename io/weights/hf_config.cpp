// io/weights/hf_config.cpp: parsing a Hugging Face config.json into a ModelConfig (load_hf_config).
#include <climits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/error.h"
#include "io/file_util.h"
#include "io/weights/model_config.h"

namespace kascade {
namespace {

using nlohmann::json;

constexpr const char* kSupportedModelTypes = "llama, mistral, qwen2";

// Typed access to the fields of one config.json, every error naming the file and the field.
class ConfigReader {
  public:
    ConfigReader(const std::filesystem::path& path, const json& root) : file_(path.string()), root_(root) {}

    const std::string& file() const { return file_; }

    // The field, or null when it is absent or JSON null (HF writes null for "use the default").
    const json* find(const char* key) const {
        auto it = root_.find(key);
        return it == root_.end() || it->is_null() ? nullptr : &*it;
    }

    const json& require(const char* key) const {
        const json* value = find(key);
        KASCADE_CHECK(value != nullptr, "{}: required field \"{}\" is missing", file_, key);
        return *value;
    }

    int positive_int(const char* key, const json& value) const {
        KASCADE_CHECK(value.is_number_integer(), "{}: field \"{}\" must be an integer, found {}", file_, key,
                      value.dump());
        const auto v = value.get<std::int64_t>();
        KASCADE_CHECK(v > 0 && v <= INT_MAX, "{}: field \"{}\" = {} must be a positive integer (at most {})", file_,
                      key, v, INT_MAX);
        return static_cast<int>(v);
    }
    int positive_int(const char* key) const { return positive_int(key, require(key)); }
    int positive_int(const char* key, int default_value) const {
        const json* value = find(key);
        return value == nullptr ? default_value : positive_int(key, *value);
    }

    float positive_float(const char* key, const json& value) const {
        KASCADE_CHECK(value.is_number(), "{}: field \"{}\" must be a number, found {}", file_, key, value.dump());
        const auto v = value.get<double>();
        KASCADE_CHECK(v > 0, "{}: field \"{}\" = {} must be positive", file_, key, v);
        return static_cast<float>(v);
    }
    float positive_float(const char* key) const { return positive_float(key, require(key)); }
    float positive_float(const char* key, float default_value) const {
        const json* value = find(key);
        return value == nullptr ? default_value : positive_float(key, *value);
    }

    bool boolean(const char* key, bool default_value) const {
        const json* value = find(key);
        if (value == nullptr) return default_value;
        KASCADE_CHECK(value->is_boolean(), "{}: field \"{}\" must be true or false, found {}", file_, key,
                      value->dump());
        return value->get<bool>();
    }

    // bos_token_id / eos_token_id: absent or null (-1), an integer, or a list whose first element is used.
    int token_id(const char* key) const {
        const json* value = find(key);
        if (value == nullptr) return -1;
        const json* id = value;
        if (value->is_array()) {
            if (value->empty()) return -1;
            id = &(*value)[0];
        }
        KASCADE_CHECK(id->is_number_integer() && id->get<std::int64_t>() >= 0 && id->get<std::int64_t>() <= INT_MAX,
                      "{}: field \"{}\" must be a non-negative integer token id (or a list of them), found {}", file_,
                      key, value->dump());
        return static_cast<int>(id->get<std::int64_t>());
    }

  private:
    std::string file_;
    const json& root_;
};

}  // namespace

ModelConfig load_hf_config(const std::filesystem::path& config_json) {
    const json root = json::parse(read_file(config_json), nullptr, /*allow_exceptions=*/false);
    KASCADE_CHECK(!root.is_discarded(), "{}: not valid JSON", config_json.string());
    KASCADE_CHECK(root.is_object(), "{}: expected a JSON object, found {}", config_json.string(), root.type_name());
    const ConfigReader r(config_json, root);

    ModelConfig c;
    const json& model_type = r.require("model_type");
    KASCADE_CHECK(model_type.is_string(), "{}: field \"model_type\" must be a string, found {}", r.file(),
                  model_type.dump());
    c.model_type = model_type.get<std::string>();
    const bool is_qwen2 = c.model_type == "qwen2";
    KASCADE_CHECK(c.model_type == "llama" || c.model_type == "mistral" || is_qwen2,
                  "{}: model_type \"{}\" is not supported (supported: {})", r.file(), c.model_type,
                  kSupportedModelTypes);

    c.dim = r.positive_int("hidden_size");
    c.hidden_dim = r.positive_int("intermediate_size");
    c.n_layers = r.positive_int("num_hidden_layers");
    c.n_heads = r.positive_int("num_attention_heads");
    c.n_kv_heads = r.positive_int("num_key_value_heads", c.n_heads);
    KASCADE_CHECK(c.n_heads % c.n_kv_heads == 0,
                  "{}: num_attention_heads = {} is not divisible by num_key_value_heads = {}", r.file(), c.n_heads,
                  c.n_kv_heads);
    if (r.find("head_dim") == nullptr) {
        KASCADE_CHECK(c.dim % c.n_heads == 0,
                      "{}: hidden_size = {} is not divisible by num_attention_heads = {} (and there is no head_dim)",
                      r.file(), c.dim, c.n_heads);
        c.head_dim = c.dim / c.n_heads;
    } else {
        c.head_dim = r.positive_int("head_dim");
    }
    KASCADE_CHECK(c.head_dim % 2 == 0, "{}: head_dim = {} must be even for RoPE", r.file(), c.head_dim);
    c.vocab_size = r.positive_int("vocab_size");
    c.max_seq_len = r.positive_int("max_position_embeddings");
    c.rope_theta = r.positive_float("rope_theta", 10000.0f);
    c.rms_norm_eps = r.positive_float("rms_norm_eps");
    // Qwen2's attention always has q/k/v biases; Llama's has them (on o_proj too) only with attention_bias.
    c.attention_bias = r.boolean("attention_bias", is_qwen2);
    KASCADE_CHECK(!r.boolean("mlp_bias", false), "{}: field \"mlp_bias\" = true is not supported (MLP biases)",
                  r.file());
    // The runtime applies plain RoPE; a scaled variant would silently give different logits.
    KASCADE_CHECK(r.find("rope_scaling") == nullptr,
                  "{}: field \"rope_scaling\" = {} is not supported (only plain RoPE)", r.file(),
                  root["rope_scaling"].dump());
    c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);  // the default of LlamaConfig and Qwen2Config
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    c.rope_layout = RopeLayout::RotateHalf;
    return c;
}

}  // namespace kascade
