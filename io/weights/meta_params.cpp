// io/weights/meta_params.cpp: Meta's params.json as a ModelConfig (load_meta_params), following the ModelArgs and
// model.py of Meta's llama (Llama 2) and llama-models (Llama 3.x) repositories.
#include <climits>
#include <cmath>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"
#include "io/weights/meta_checkpoint.h"

namespace kascade {
namespace {

using nlohmann::json;

// The fields of Meta's ModelArgs that a params.json may hold. max_batch_size and max_seq_len size the buffers of
// Meta's generator and say nothing about the weights.
constexpr std::string_view kFields[] = {
    "dim",      "n_layers",   "n_heads",         "n_kv_heads",     "vocab_size", "multiple_of", "ffn_dim_multiplier",
    "norm_eps", "rope_theta", "use_scaled_rope", "max_batch_size", "max_seq_len"};
constexpr const char* kFieldList =
    "dim, n_layers, n_heads, n_kv_heads, vocab_size, multiple_of, ffn_dim_multiplier, norm_eps, rope_theta, "
    "use_scaled_rope, max_batch_size, max_seq_len";

// ModelArgs' defaults, for fields a params.json leaves out. Llama 1 and 2 files have no rope_theta: their model.py
// uses 10000.
constexpr int kDefaultMultipleOf = 256;
constexpr float kDefaultNormEps = 1e-5f;
constexpr float kDefaultRopeTheta = 10000.0f;

// Llama 3.1's RoPE scaling, which Meta's model.py applies (apply_scaling) when use_scaled_rope is true.
constexpr double kScaledRopeFactor = 8.0;
constexpr double kScaledRopeLowFreqFactor = 1.0;
constexpr double kScaledRopeHighFreqFactor = 4.0;
constexpr int kScaledRopeOriginalContext = 8192;

// params.json does not give the context the model was trained for; these are the lengths Hugging Face's
// convert_llama_weights_to_hf.py assigns per family, told apart by their RoPE settings.
constexpr int kContextLlama31 = 131072;   // use_scaled_rope (Llama 3.1, 3.2, 3.3)
constexpr int kContextLlama3 = 8192;      // rope_theta 500000
constexpr int kContextCodeLlama = 16384;  // another rope_theta above 10000 (Code Llama: 1e6)
constexpr int kContextLlama2 = 4096;      // rope_theta 10000 (Llama 1 was trained on 2048)
constexpr float kLlama3RopeTheta = 500000.0f;

// Typed access to params.json's fields, every error naming the file and the field.
class ParamsReader {
  public:
    ParamsReader(const std::filesystem::path& path, const json& root) : file_(path.string()), root_(root) {}

    const std::string& file() const { return file_; }

    // The field, or null when it is absent or JSON null.
    const json* find(const char* key) const {
        const auto it = root_.find(key);
        return it == root_.end() || it->is_null() ? nullptr : &*it;
    }

    int positive_int(const char* key, int default_value = 0) const {
        const json* value = find(key);
        KASCADE_CHECK(value != nullptr || default_value > 0, "{}: required field \"{}\" is missing", file_, key);
        if (value == nullptr) return default_value;
        KASCADE_CHECK(
            value->is_number_integer() && value->get<std::int64_t>() > 0 && value->get<std::int64_t>() <= INT_MAX,
            "{}: field \"{}\" must be a positive integer, found {}", file_, key, value->dump());
        return static_cast<int>(value->get<std::int64_t>());
    }

    float positive_float(const char* key, float default_value) const {
        const json* value = find(key);
        if (value == nullptr) return default_value;
        // Checked as the float the model uses: 1e-86 is positive but rounds to 0.
        const auto f = value->is_number() ? static_cast<float>(value->get<double>()) : 0.0f;
        KASCADE_CHECK(f > 0 && std::isfinite(f),
                      "{}: field \"{}\" must be a positive number a float can hold, found {}", file_, key,
                      value->dump());
        return f;
    }

    bool boolean(const char* key) const {
        const json* value = find(key);
        if (value == nullptr) return false;
        KASCADE_CHECK(value->is_boolean(), "{}: field \"{}\" must be true or false, found {}", file_, key,
                      value->dump());
        return value->get<bool>();
    }

  private:
    std::string file_;
    const json& root_;
};

// The FFN width as Meta's FeedForward computes it from 4 * dim: two thirds of it (truncated), times
// ffn_dim_multiplier (truncated), rounded up to a multiple of multiple_of. Python's float arithmetic is IEEE double,
// as here, so the truncations agree.
int ffn_hidden_dim(const ParamsReader& r, int dim) {
    const int multiple_of = r.positive_int("multiple_of", kDefaultMultipleOf);
    auto hidden = static_cast<std::int64_t>(2.0 * (4.0 * dim) / 3.0);
    if (const json* multiplier = r.find("ffn_dim_multiplier")) {
        KASCADE_CHECK(multiplier->is_number() && multiplier->get<double>() > 0 &&
                          multiplier->get<double>() * static_cast<double>(hidden) < INT_MAX,
                      "{}: field \"ffn_dim_multiplier\" must be a positive number that keeps the FFN width below 2^31, "
                      "found {}",
                      r.file(), multiplier->dump());
        hidden = static_cast<std::int64_t>(multiplier->get<double>() * static_cast<double>(hidden));
    }
    hidden = multiple_of * ((hidden + multiple_of - 1) / multiple_of);
    KASCADE_CHECK(hidden > 0 && hidden <= INT_MAX,
                  "{}: fields \"dim\" = {}, \"multiple_of\" = {} and \"ffn_dim_multiplier\" imply an FFN width of {}",
                  r.file(), dim, multiple_of, hidden);
    return static_cast<int>(hidden);
}

}  // namespace

ModelConfig load_meta_params(const std::filesystem::path& params_json) {
    const json root = json::parse(read_file(params_json), nullptr, /*allow_exceptions=*/false);
    KASCADE_CHECK(!root.is_discarded(), "{}: not valid JSON", params_json.string());
    KASCADE_CHECK(root.is_object(), "{}: expected a JSON object, found {}", params_json.string(), root.type_name());
    const ParamsReader r(params_json, root);
    // A field kascade does not know could change the network (Llama 3.2 Vision's cross-attention, quantization or
    // LoRA arguments): refused rather than ignored.
    for (const auto& [key, value] : root.items()) {
        bool known = false;
        for (const std::string_view field : kFields) known = known || key == field;
        KASCADE_CHECK(known, "{}: field \"{}\" is not supported (the fields of a Llama params.json: {})", r.file(), key,
                      kFieldList);
    }

    ModelConfig c;
    c.model_type = "llama";
    c.dim = r.positive_int("dim");
    c.n_layers = r.positive_int("n_layers");
    c.n_heads = r.positive_int("n_heads");
    c.n_kv_heads = r.positive_int("n_kv_heads", c.n_heads);
    KASCADE_CHECK(c.n_heads % c.n_kv_heads == 0, "{}: field \"n_heads\" = {} is not divisible by \"n_kv_heads\" = {}",
                  r.file(), c.n_heads, c.n_kv_heads);
    KASCADE_CHECK(c.dim % c.n_heads == 0, "{}: field \"dim\" = {} is not divisible by \"n_heads\" = {}", r.file(),
                  c.dim, c.n_heads);
    c.head_dim = c.dim / c.n_heads;
    KASCADE_CHECK(c.head_dim % 2 == 0, "{}: fields \"dim\" / \"n_heads\" give a head size of {}, which must be even",
                  r.file(), c.head_dim);
    // Llama 1 and 2 write vocab_size -1: "defined later by tokenizer"; the loader takes it from the weights.
    const json* vocab = r.find("vocab_size");
    c.vocab_size = vocab == nullptr || *vocab == -1 ? 0 : r.positive_int("vocab_size");
    c.hidden_dim = ffn_hidden_dim(r, c.dim);
    c.rms_norm_eps = r.positive_float("norm_eps", kDefaultNormEps);
    c.rope_theta = r.positive_float("rope_theta", kDefaultRopeTheta);
    if (r.boolean("use_scaled_rope")) {
        c.rope_scaling.type = RopeScalingType::Llama3;
        c.rope_scaling.factor = kScaledRopeFactor;
        c.rope_scaling.low_freq_factor = kScaledRopeLowFreqFactor;
        c.rope_scaling.high_freq_factor = kScaledRopeHighFreqFactor;
        c.rope_scaling.original_max_position_embeddings = kScaledRopeOriginalContext;
        c.max_seq_len = kContextLlama31;
    } else if (c.rope_theta == kLlama3RopeTheta) {
        c.max_seq_len = kContextLlama3;
    } else {
        c.max_seq_len = c.rope_theta > kDefaultRopeTheta ? kContextCodeLlama : kContextLlama2;
    }
    c.attention_bias = false;
    // model.py's apply_rotary_emb rotates the pairs (2i, 2i + 1) of each head; load_meta_checkpoint reorders the
    // rows of wq and wk to rotate-half and sets RotateHalf.
    c.rope_layout = RopeLayout::Interleaved;
    return c;
}

}  // namespace kascade
