// io/weights/hf_config.cpp: parsing a Hugging Face config.json into a ModelConfig (load_hf_config).
#include <climits>
#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"
#include "io/weights/model_config.h"

namespace kascade {
namespace {

using nlohmann::json;

constexpr const char* kSupportedModelTypes = "llama, mistral, qwen2, qwen3";
constexpr const char* kSupportedRopeTypes = "default, linear, llama3, yarn";

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

    int non_negative_int(const char* key, int default_value) const {
        const json* value = find(key);
        if (value == nullptr) return default_value;
        KASCADE_CHECK(
            value->is_number_integer() && value->get<std::int64_t>() >= 0 && value->get<std::int64_t>() <= INT_MAX,
            "{}: field \"{}\" must be a non-negative integer, found {}", file_, key, value->dump());
        return static_cast<int>(value->get<std::int64_t>());
    }

    float positive_float(const char* key, const json& value) const {
        KASCADE_CHECK(value.is_number(), "{}: field \"{}\" must be a number, found {}", file_, key, value.dump());
        const auto v = value.get<double>();
        // Checked as the float the model uses: 1e-86 is positive but rounds to 0, 1e300 to infinity.
        const auto f = static_cast<float>(v);
        KASCADE_CHECK(f > 0 && std::isfinite(f), "{}: field \"{}\" = {} must be a positive number a float can hold",
                      file_, key, v);
        return f;
    }
    float positive_float(const char* key) const { return positive_float(key, require(key)); }
    float positive_float(const char* key, float default_value) const {
        const json* value = find(key);
        return value == nullptr ? default_value : positive_float(key, *value);
    }

    // A field of a nested object (rope_scaling), named "object.key" in errors.
    double nested_positive(const json& object, const char* object_name, const char* key, double default_value,
                           bool required) const {
        auto it = object.find(key);
        if (it == object.end() || it->is_null()) {
            KASCADE_CHECK(!required, "{}: required field \"{}.{}\" is missing", file_, object_name, key);
            return default_value;
        }
        KASCADE_CHECK(it->is_number() && it->get<double>() > 0,
                      "{}: field \"{}.{}\" must be a positive number, found {}", file_, object_name, key, it->dump());
        return it->get<double>();
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

// config.json fields that change the forward pass of some Hugging Face model but that kascade does not implement:
// each is refused unless absent, null, or the value kascade computes with (`implemented`; null: refused whenever
// set). The fields kascade implements are the ones load_hf_config reads; every other field (architectures,
// torch_dtype, initializer_range, use_cache, attention_dropout, pretraining_tp, ...) leaves the forward pass as it is.
struct UnimplementedField {
    const char* name;
    json implemented;
    const char* what;  ///< what it would change, for the message
};

const std::vector<UnimplementedField>& unimplemented_fields() {
    static const std::vector<UnimplementedField> fields = {
        {"hidden_act", "silu", "the MLP activation (SwiGLU with SiLU)"},
        {"hidden_activation", nullptr, "Gemma's MLP activation"},
        {"mlp_bias", false, "MLP biases"},
        {"partial_rotary_factor", 1.0, "RoPE on part of each head"},
        {"use_qk_norm", false, "Llama 4's q/k normalisation"},
        {"no_rope_layers", nullptr, "layers without RoPE"},
        {"final_logit_softcapping", nullptr, "Gemma 2's logit soft-capping"},
        {"attn_logit_softcapping", nullptr, "Gemma 2's attention soft-capping"},
        {"query_pre_attn_scalar", nullptr, "Gemma 2's attention scale"},
        {"embedding_multiplier", nullptr, "Granite's embedding scale"},
        {"attention_multiplier", nullptr, "Granite's attention scale"},
        {"residual_multiplier", nullptr, "Granite's residual scale"},
        {"logits_scaling", nullptr, "Granite's logit scale"},
        {"num_local_experts", nullptr, "a mixture of experts"},
        {"num_experts", nullptr, "a mixture of experts"},
    };
    return fields;
}

void refuse_unimplemented_fields(const ConfigReader& r) {
    for (const UnimplementedField& f : unimplemented_fields()) {
        const json* value = r.find(f.name);
        if (value == nullptr || (!f.implemented.is_null() && *value == f.implemented)) continue;
        if (f.implemented.is_null()) KASCADE_FAIL("{}: field \"{}\" is not supported ({})", r.file(), f.name, f.what);
        KASCADE_FAIL("{}: field \"{}\" = {} is not supported (supported: {}; {})", r.file(), f.name, value->dump(),
                     f.implemented.dump(), f.what);
    }
}

// rope_scaling (or transformers 5's rope_parameters): the type and the fields it uses, as Hugging Face's
// modeling_rope_utils reads them. Unknown types are refused: a different frequency scheme silently gives other logits.
RopeScaling parse_rope_scaling(const ConfigReader& r, const json& object, const char* name) {
    KASCADE_CHECK(object.is_object(), "{}: field \"{}\" must be an object or null, found {}", r.file(), name,
                  object.dump());
    const json* type_field = nullptr;
    for (const char* key : {"rope_type", "type"}) {  // "type" is the older spelling
        auto it = object.find(key);
        if (it != object.end() && !it->is_null()) {
            type_field = &*it;
            break;
        }
    }
    KASCADE_CHECK(type_field != nullptr, "{}: field \"{}.rope_type\" is missing (supported: {})", r.file(), name,
                  kSupportedRopeTypes);
    KASCADE_CHECK(type_field->is_string(), "{}: field \"{}.rope_type\" must be a string, found {}", r.file(), name,
                  type_field->dump());
    const std::string type = type_field->get<std::string>();
    RopeScaling s;
    if (type == "default") return s;
    if (type == "linear") {
        s.type = RopeScalingType::Linear;
        s.factor = r.nested_positive(object, name, "factor", 1.0, true);
    } else if (type == "llama3") {
        s.type = RopeScalingType::Llama3;
        s.factor = r.nested_positive(object, name, "factor", 1.0, true);
        s.low_freq_factor = r.nested_positive(object, name, "low_freq_factor", 1.0, true);
        s.high_freq_factor = r.nested_positive(object, name, "high_freq_factor", 4.0, true);
        s.original_max_position_embeddings =
            static_cast<int>(r.nested_positive(object, name, "original_max_position_embeddings", 0, true));
        KASCADE_CHECK(s.high_freq_factor > s.low_freq_factor,
                      "{}: field \"{}.high_freq_factor\" = {} must be greater than low_freq_factor = {}", r.file(),
                      name, s.high_freq_factor, s.low_freq_factor);
    } else if (type == "yarn") {
        s.type = RopeScalingType::Yarn;
        s.original_max_position_embeddings =
            static_cast<int>(r.nested_positive(object, name, "original_max_position_embeddings", 0, false));
        s.factor = r.nested_positive(object, name, "factor", 0, false);
        s.attention_factor = r.nested_positive(object, name, "attention_factor", 0, false);
        s.beta_fast = r.nested_positive(object, name, "beta_fast", 32.0, false);
        s.beta_slow = r.nested_positive(object, name, "beta_slow", 1.0, false);
        s.mscale = r.nested_positive(object, name, "mscale", 0, false);
        s.mscale_all_dim = r.nested_positive(object, name, "mscale_all_dim", 0, false);
        auto truncate = object.find("truncate");
        if (truncate != object.end() && !truncate->is_null()) {
            KASCADE_CHECK(truncate->is_boolean(), "{}: field \"{}.truncate\" must be true or false, found {}", r.file(),
                          name, truncate->dump());
            s.truncate = truncate->get<bool>();
        }
    } else {
        KASCADE_FAIL("{}: field \"{}.rope_type\" = \"{}\" is not supported (supported: {})", r.file(), name, type,
                     kSupportedRopeTypes);
    }
    return s;
}

// The attention window of every layer, as Hugging Face decides it: an explicit "layer_types" list wins; else
// Mistral windows every layer when sliding_window is set, and Qwen2/Qwen3 window the layers from max_window_layers
// on when use_sliding_window is true. Llama has no sliding window.
std::vector<int> parse_layer_windows(const ConfigReader& r, const ModelConfig& c) {
    const bool is_qwen = c.model_type == "qwen2" || c.model_type == "qwen3";
    std::vector<int> windows(c.n_layers, 0);
    const int window = r.positive_int("sliding_window", 0);
    if (const json* types = r.find("layer_types")) {
        KASCADE_CHECK(types->is_array() && static_cast<int>(types->size()) == c.n_layers,
                      "{}: field \"layer_types\" must be a list of num_hidden_layers = {} entries, found {}", r.file(),
                      c.n_layers, types->dump());
        for (int l = 0; l < c.n_layers; ++l) {
            const json& t = (*types)[l];
            const bool sliding = t == "sliding_attention";
            KASCADE_CHECK(sliding || t == "full_attention",
                          "{}: field \"layer_types[{}]\" = {} is not supported (supported: full_attention, "
                          "sliding_attention)",
                          r.file(), l, t.dump());
            KASCADE_CHECK(!sliding || window > 0,
                          "{}: field \"layer_types[{}]\" is sliding_attention but \"sliding_window\" is not set",
                          r.file(), l);
            windows[l] = sliding && c.model_type != "llama" ? window : 0;
        }
        return windows;
    }
    if (window == 0 || c.model_type == "llama") return windows;
    if (!is_qwen) {  // Mistral: every layer
        windows.assign(c.n_layers, window);
        return windows;
    }
    if (!r.boolean("use_sliding_window", false)) return windows;
    const int first = r.non_negative_int("max_window_layers", 28);  // Qwen2Config's default
    for (int l = first; l < c.n_layers; ++l) windows[l] = window;
    return windows;
}

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
    const bool is_qwen3 = c.model_type == "qwen3";
    KASCADE_CHECK(c.model_type == "llama" || c.model_type == "mistral" || is_qwen2 || is_qwen3,
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
    // transformers 5 writes rope_theta and the scaling together as rope_parameters.
    const json* rope_parameters = r.find("rope_parameters");
    const json* rope_theta = r.find("rope_theta");
    if (rope_theta == nullptr && rope_parameters != nullptr && rope_parameters->is_object() &&
        rope_parameters->contains("rope_theta")) {
        rope_theta = &(*rope_parameters)["rope_theta"];
    }
    c.rope_theta = rope_theta == nullptr ? 10000.0f : r.positive_float("rope_theta", *rope_theta);
    c.rms_norm_eps = r.positive_float("rms_norm_eps");
    // Qwen2's attention always has q/k/v biases; Llama's has them (on o_proj too) only with attention_bias.
    c.attention_bias = r.boolean("attention_bias", is_qwen2);
    refuse_unimplemented_fields(r);
    if (const json* scaling = r.find("rope_scaling")) {
        c.rope_scaling = parse_rope_scaling(r, *scaling, "rope_scaling");
    } else if (rope_parameters != nullptr) {
        c.rope_scaling = parse_rope_scaling(r, *rope_parameters, "rope_parameters");
    }
    if (c.rope_scaling.type == RopeScalingType::Yarn) {
        // YaRN's pre-training context defaults to max_position_embeddings, and its factor to the ratio of the two.
        RopeScaling& s = c.rope_scaling;
        if (s.original_max_position_embeddings == 0) s.original_max_position_embeddings = c.max_seq_len;
        if (s.factor == 0) s.factor = static_cast<double>(c.max_seq_len) / s.original_max_position_embeddings;
    }
    c.qk_norm = is_qwen3;  // Qwen3 normalises each head of q and k (q_norm, k_norm) before RoPE
    c.layer_window = parse_layer_windows(r, c);
    c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);  // the default of LlamaConfig and Qwen2Config
    c.bos_token_id = r.token_id("bos_token_id");
    c.eos_token_id = r.token_id("eos_token_id");
    c.rope_layout = RopeLayout::RotateHalf;
    return c;
}

}  // namespace kascade
