// io/weights/gguf_checkpoint.cpp: the llama.* keys of a GGUF file as a ModelConfig, its tensors as ModelWeights.
#include "io/weights/gguf_checkpoint.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "io/weights/dtype.h"
#include "io/weights/gguf_dequant.h"
#include "io/weights/weight_storage.h"

namespace kascade {
namespace {

constexpr std::string_view kArchitecture = "llama";
constexpr const char* kRopeFreqs = "rope_freqs.weight";  // read into the config, not placed

std::string key(std::string_view name) {
    return fmt::format("{}.{}", kArchitecture, name);
}

int positive_int(const GgufFile& f, const std::string& k, std::int64_t value) {
    KASCADE_CHECK(value > 0 && value <= INT_MAX, "{}: metadata key \"{}\" = {} must be a positive integer (at most {})",
                  f.path().string(), k, value, INT_MAX);
    return static_cast<int>(value);
}

int required_int(const GgufFile& f, const std::string& k) {
    KASCADE_CHECK(f.find(k) != nullptr, "{}: required metadata key \"{}\" is missing", f.path().string(), k);
    return positive_int(f, k, f.integer(k, 0));
}

float positive_float(const GgufFile& f, const std::string& k, double value) {
    const auto v = static_cast<float>(value);
    KASCADE_CHECK(v > 0 && std::isfinite(v), "{}: metadata key \"{}\" = {} must be a positive number a float can hold",
                  f.path().string(), k, value);
    return v;
}

// "[512, 256]": a matrix shape row-major, as the Hugging Face loader prints it (ggml's extents reversed).
std::string row_major_shape(const std::vector<std::uint64_t>& dims) {
    std::string text;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) text += (text.empty() ? "" : ", ") + std::to_string(*it);
    return "[" + text + "]";
}

// Places the tensors of one GGUF file: F32/F16/BF16 tensors kept in their order go through WeightPlacement (in place
// when the dtype is kept); quantized tensors and the reordered q/k matrices are queued and converted by finish(),
// row by row in parallel, through fp32.
class GgufTensorPlacer {
  public:
    GgufTensorPlacer(const GgufFile& file, WeightStorage& storage, WeightsDType target)
        : file_(file), storage_(storage), placement_(storage, target), target_(target) {}

    /// A norm weight of `size` elements, as fp32.
    const float* vector(const std::string& name, std::int64_t size) {
        const GgufTensor& t = find(name, {static_cast<std::uint64_t>(size)});
        if (const std::optional<DType> dtype = float_dtype(t.type)) {
            check_finite(t, *dtype);
            return placement_.vector(*dtype, t.data, t.numel());
        }
        return reinterpret_cast<const float*>(queue(t, DType::F32, 1, static_cast<int>(size), 0));
    }

    /// A [rows][cols] matrix. `rope_heads` > 0: the rows are llama.cpp's reordering of that many heads (q or k),
    /// put back in Hugging Face's order.
    WeightMatrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols, int rope_heads = 0) {
        const GgufTensor& t = find(name, {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows)});
        const std::optional<DType> dtype = float_dtype(t.type);
        const int r = static_cast<int>(rows);
        const int c = static_cast<int>(cols);
        if (dtype && rope_heads == 0) {
            check_finite(t, *dtype);
            return placement_.matrix(*dtype, t.data, r, c);
        }
        // A quantized tensor becomes BF16 unless the options ask for fp32 (or for BF16 anyway).
        DType to = target_ == WeightsDType::F32 ? DType::F32 : DType::BF16;
        if (target_ == WeightsDType::File && dtype) to = *dtype;
        return WeightMatrix{to, queue(t, to, r, c, rope_heads), r, c};
    }

    /// The names of the tensors no vector() or matrix() call took.
    std::vector<std::string> unused() const {
        std::vector<std::string> names;
        for (const GgufTensor& t : file_.tensors()) {
            if (!used_.contains(t.name)) names.push_back(t.name);
        }
        return names;
    }

    /// Fills every buffer: converts what WeightPlacement queued, then the queued GGUF rows.
    void finish();

  private:
    struct Job {
        const GgufTensor* tensor;
        DType to;
        std::uint8_t* dst;
        int rows;
        int cols;
        int rope_heads;
    };

    static std::optional<DType> float_dtype(GgmlType type) {
        switch (type) {
            case GgmlType::F32:
                return DType::F32;
            case GgmlType::F16:
                return DType::F16;
            case GgmlType::BF16:
                return DType::BF16;
            default:
                return std::nullopt;
        }
    }

    const GgufTensor& find(const std::string& name, const std::vector<std::uint64_t>& expected_dims) {
        used_.insert(name);
        const GgufTensor* t = file_.find_tensor(name);
        KASCADE_CHECK(t != nullptr, "{}: tensor \"{}\" is missing (the llama.* keys imply shape {})",
                      file_.path().string(), name, row_major_shape(expected_dims));
        KASCADE_CHECK(t->dims == expected_dims, "{}: tensor \"{}\" has shape {}, the llama.* keys imply {}",
                      file_.path().string(), name, row_major_shape(t->dims), row_major_shape(expected_dims));
        KASCADE_CHECK(gguf_can_dequantize(t->type),
                      "{}: tensor \"{}\" has type {}, which kascade does not read (supported: {})",
                      file_.path().string(), name, ggml_type_traits(t->type).name, gguf_dequantizable_types());
        return *t;
    }

    // As the other loaders do: a NaN or infinity in a weight would become a plausible perplexity downstream.
    void check_finite(const GgufTensor& t, DType dtype) const {
        const std::size_t bad = first_non_finite(dtype, t.data, t.numel());
        KASCADE_CHECK(bad == t.numel(), "{}: tensor \"{}\" holds a non-finite value (NaN or infinity) at element {}",
                      file_.path().string(), t.name, bad);
    }

    std::uint8_t* queue(const GgufTensor& t, DType to, int rows, int cols, int rope_heads) {
        std::uint8_t* dst = storage_.allocate(static_cast<std::size_t>(rows) * cols * dtype_size(to));
        jobs_.push_back({&t, to, dst, rows, cols, rope_heads});
        return dst;
    }

    const GgufFile& file_;
    WeightStorage& storage_;
    WeightPlacement placement_;
    WeightsDType target_;
    std::vector<Job> jobs_;
    std::set<std::string, std::less<>> used_;
};

// The row of llama.cpp's q/k layout that holds row `row` of Hugging Face's. convert_hf_to_gguf.py's
// LlamaModel.permute reshapes each head's rows to (2, head_dim / 2), swaps the two axes and flattens, so that HF row
// h * head_dim + half * head_dim / 2 + i lands at h * head_dim + 2 i + half.
int gguf_rope_row(int row, int rows, int heads) {
    const int head_dim = rows / heads;
    const int h = row / head_dim;
    const int within = row % head_dim;
    const int half = within / (head_dim / 2);
    const int i = within % (head_dim / 2);
    return h * head_dim + 2 * i + half;
}

void GgufTensorPlacer::finish() {
    placement_.finish();
    // Every (job, row) pair, converted in parallel; the first non-finite value found (lowest job, then element) is
    // reported after the loop, since exceptions must not leave an OpenMP region.
    std::vector<std::size_t> first_row(jobs_.size() + 1, 0);
    for (std::size_t j = 0; j < jobs_.size(); ++j) first_row[j + 1] = first_row[j] + jobs_[j].rows;
    const auto total_rows = static_cast<std::int64_t>(first_row.back());
    int max_cols = 0;
    for (const Job& job : jobs_) max_cols = std::max(max_cols, job.cols);
    std::size_t bad_job = jobs_.size();
    std::size_t bad_element = 0;
#pragma omp parallel
    {
        std::vector<float> row_f32(static_cast<std::size_t>(max_cols));
#pragma omp for schedule(dynamic, 64)
        for (std::int64_t g = 0; g < total_rows; ++g) {
            const auto j = static_cast<std::size_t>(
                std::upper_bound(first_row.begin(), first_row.end(), static_cast<std::size_t>(g)) - first_row.begin() -
                1);
            const Job& job = jobs_[j];
            const int row = static_cast<int>(g - static_cast<std::int64_t>(first_row[j]));
            const int src_row = job.rope_heads > 0 ? gguf_rope_row(row, job.rows, job.rope_heads) : row;
            const GgmlTypeTraits& traits = ggml_type_traits(job.tensor->type);
            const std::size_t row_bytes =
                static_cast<std::size_t>(job.cols) / traits.block_elements * traits.block_bytes;
            const auto cols = static_cast<std::size_t>(job.cols);
            gguf_dequantize(job.tensor->type, job.tensor->data + src_row * row_bytes, row_f32.data(), cols);
            for (std::size_t i = 0; i < cols; ++i) {
                if (!std::isfinite(row_f32[i])) {
#pragma omp critical(gguf_non_finite)
                    {
                        const std::size_t element = static_cast<std::size_t>(src_row) * cols + i;
                        if (j < bad_job || (j == bad_job && element < bad_element)) {
                            bad_job = j;
                            bad_element = element;
                        }
                    }
                    break;
                }
            }
            convert_from_f32(job.to, row_f32.data(), job.dst + row * cols * dtype_size(job.to), cols);
        }
    }
    KASCADE_CHECK(bad_job == jobs_.size(),
                  "{}: tensor \"{}\" holds a non-finite value (NaN or infinity) at element {} once dequantized",
                  file_.path().string(), jobs_[std::min(bad_job, jobs_.size() - 1)].tensor->name, bad_element);
    jobs_.clear();
}

// rope.scaling.type (or the older rope.scale_linear): "none" and "linear" are what kascade computes like llama.cpp.
RopeScaling gguf_rope_scaling(const GgufFile& f) {
    RopeScaling s;
    const std::string type_key = key("rope.scaling.type");
    const std::string factor_key = key("rope.scaling.factor");
    const std::string legacy_key = key("rope.scale_linear");
    std::string type = f.string(type_key, "");
    if (type.empty() && f.find(legacy_key) != nullptr) type = "linear";
    if (type.empty() || type == "none") return s;
    KASCADE_CHECK(type == "linear", "{}: metadata key \"{}\" = \"{}\" is not supported (supported: none, linear)",
                  f.path().string(), type_key, type);
    const std::string& k = f.find(factor_key) != nullptr ? factor_key : legacy_key;
    KASCADE_CHECK(f.find(k) != nullptr, "{}: \"{}\" is linear but metadata key \"{}\" is missing", f.path().string(),
                  type_key, factor_key);
    s.type = RopeScalingType::Linear;
    s.factor = positive_float(f, k, f.real(k, 0));
    return s;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
    const std::string name = f.path().string();
    KASCADE_CHECK(f.find("general.architecture") != nullptr,
                  "{}: required metadata key \"general.architecture\" is "
                  "missing",
                  name);
    const std::string architecture = f.string("general.architecture", "");
    KASCADE_CHECK(architecture == kArchitecture,
                  "{}: metadata key \"general.architecture\" = \"{}\" is not supported (supported: {})", name,
                  architecture, kArchitecture);
    ModelConfig c;
    c.model_type = "llama";
    c.max_seq_len = required_int(f, key("context_length"));
    c.dim = required_int(f, key("embedding_length"));
    c.n_layers = required_int(f, key("block_count"));
    // Each block holds nine tensors: a count the file cannot hold is refused before anything is sized by it.
    constexpr size_t kTensorsPerBlock = 9;
    KASCADE_CHECK(static_cast<size_t>(c.n_layers) <= f.tensors().size() / kTensorsPerBlock,
                  "{}: {} = {} blocks, but the file holds {} tensors ({} per block expected)", name, key("block_count"),
                  c.n_layers, f.tensors().size(), kTensorsPerBlock);
    c.hidden_dim = required_int(f, key("feed_forward_length"));
    c.n_heads = required_int(f, key("attention.head_count"));
    const std::string kv_key = key("attention.head_count_kv");
    c.n_kv_heads = positive_int(f, kv_key, f.integer(kv_key, c.n_heads));
    KASCADE_CHECK(c.n_heads % c.n_kv_heads == 0, "{}: {} = {} is not divisible by {} = {}", name,
                  key("attention.head_count"), c.n_heads, kv_key, c.n_kv_heads);
    const std::string key_length = key("attention.key_length");
    if (f.find(key_length) != nullptr) {
        c.head_dim = positive_int(f, key_length, f.integer(key_length, 0));
    } else {
        KASCADE_CHECK(c.dim % c.n_heads == 0, "{}: {} = {} is not divisible by {} = {} (and there is no {})", name,
                      key("embedding_length"), c.dim, key("attention.head_count"), c.n_heads, key_length);
        c.head_dim = c.dim / c.n_heads;
    }
    const std::string value_length = key("attention.value_length");
    KASCADE_CHECK(f.integer(value_length, c.head_dim) == c.head_dim,
                  "{}: metadata key \"{}\" = {} differs from the "
                  "key length {} (not supported)",
                  name, value_length, f.integer(value_length, 0), c.head_dim);
    KASCADE_CHECK(c.head_dim % 2 == 0, "{}: the head size {} must be even for RoPE", name, c.head_dim);
    const std::string rope_dims = key("rope.dimension_count");
    KASCADE_CHECK(f.integer(rope_dims, c.head_dim) == c.head_dim,
                  "{}: metadata key \"{}\" = {} is not the head size {} (RoPE on part of each head is not supported)",
                  name, rope_dims, f.integer(rope_dims, 0), c.head_dim);
    const std::string experts = key("expert_count");
    KASCADE_CHECK(f.integer(experts, 0) == 0, "{}: metadata key \"{}\" = {}: mixtures of experts are not supported",
                  name, experts, f.integer(experts, 0));
    const std::string eps = key("attention.layer_norm_rms_epsilon");
    KASCADE_CHECK(f.find(eps) != nullptr, "{}: required metadata key \"{}\" is missing", name, eps);
    c.rms_norm_eps = positive_float(f, eps, f.real(eps, 0));
    const std::string theta = key("rope.freq_base");
    c.rope_theta = positive_float(f, theta, f.real(theta, 10000.0));  // llama.cpp's default
    c.rope_scaling = gguf_rope_scaling(f);
    // Llama 3.1's RoPE scaling as llama.cpp's converter stores it: one factor per frequency.
    if (const GgufTensor* t = f.find_tensor(kRopeFreqs)) {
        const std::vector<std::uint64_t> expected{static_cast<std::uint64_t>(c.head_dim / 2)};
        KASCADE_CHECK(t->type == GgmlType::F32 && t->dims == expected,
                      "{}: tensor \"{}\" is {} of shape {}, expected F32 of shape {}", name, kRopeFreqs,
                      ggml_type_traits(t->type).name, row_major_shape(t->dims), row_major_shape(expected));
        for (std::size_t j = 0; j < expected[0]; ++j) {
            float factor;
            std::memcpy(&factor, t->data + 4 * j, 4);
            KASCADE_CHECK(factor > 0 && std::isfinite(factor),
                          "{}: tensor \"{}\" element {} = {} must be a positive number", name, kRopeFreqs, j, factor);
            c.rope_freq_factors.push_back(factor);
        }
    }
    // The vocabulary: llama.vocab_size, else the length of the token list (what llama.cpp reads).
    const std::string vocab_key = key("vocab_size");
    if (f.find(vocab_key) != nullptr) {
        c.vocab_size = positive_int(f, vocab_key, f.integer(vocab_key, 0));
    } else {
        const GgufValue* tokens = f.array("tokenizer.ggml.tokens", {GgufValueType::String});
        KASCADE_CHECK(tokens != nullptr, "{}: neither \"{}\" nor \"tokenizer.ggml.tokens\" gives the vocabulary size",
                      name, vocab_key);
        c.vocab_size = positive_int(f, "tokenizer.ggml.tokens", static_cast<std::int64_t>(tokens->elements.size()));
    }
    c.attention_bias = false;
    c.qk_norm = false;
    c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
    auto token_id = [&](const char* k) {
        const std::int64_t id = f.integer(k, -1);
        KASCADE_CHECK(id >= -1 && id < c.vocab_size,
                      "{}: metadata key \"{}\" = {} is not a token id (vocabulary of {})", name, k, id, c.vocab_size);
        return static_cast<int>(id);
    };
    c.bos_token_id = token_id("tokenizer.ggml.bos_token_id");
    c.eos_token_id = token_id("tokenizer.ggml.eos_token_id");
    c.rope_layout = RopeLayout::RotateHalf;  // the loader undoes the converter's reordering of q and k
    c.layer_window.assign(c.n_layers, 0);
    return c;
}

ModelWeights load_gguf_checkpoint(const std::filesystem::path& path, const LoadOptions& options) {
    auto file = std::make_shared<GgufFile>(path);
    ModelWeights w;
    w.config = gguf_model_config(*file);
    const ModelConfig& c = w.config;
    auto storage = std::make_shared<WeightStorage>();
    storage->sources.push_back(file);
    GgufTensorPlacer place(*file, *storage, options.weights_dtype);

    const std::int64_t dim = c.dim;
    const std::int64_t hidden = c.hidden_dim;
    const std::int64_t q_rows = static_cast<std::int64_t>(c.n_heads) * c.head_dim;
    const std::int64_t kv_rows = static_cast<std::int64_t>(c.n_kv_heads) * c.head_dim;
    w.embed = place.matrix("token_embd.weight", c.vocab_size, dim);
    w.layers.resize(c.n_layers);
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights& l = w.layers[i];
        const std::string p = fmt::format("blk.{}.", i);
        l.attn_norm = place.vector(p + "attn_norm.weight", dim);
        l.wq = place.matrix(p + "attn_q.weight", q_rows, dim, c.n_heads);
        l.wk = place.matrix(p + "attn_k.weight", kv_rows, dim, c.n_kv_heads);
        l.wv = place.matrix(p + "attn_v.weight", kv_rows, dim);
        l.wo = place.matrix(p + "attn_output.weight", dim, q_rows);
        l.mlp_norm = place.vector(p + "ffn_norm.weight", dim);
        l.w_gate = place.matrix(p + "ffn_gate.weight", hidden, dim);
        l.w_up = place.matrix(p + "ffn_up.weight", hidden, dim);
        l.w_down = place.matrix(p + "ffn_down.weight", dim, hidden);
    }
    w.final_norm = place.vector("output_norm.weight", dim);
    w.lm_head = c.tie_word_embeddings ? w.embed : place.matrix("output.weight", c.vocab_size, dim);
    std::vector<std::string> unused = place.unused();
    std::erase(unused, kRopeFreqs);
    KASCADE_CHECK(unused.empty(),
                  "{}: {} tensor(s) are not used by the model its llama.* keys describe, e.g. \"{}\" (block_count = "
                  "{}): biases and other extras are not supported",
                  path.string(), unused.size(), unused.front(), c.n_layers);
    place.finish();
    w.weights_dtype = options.weights_dtype;
    w.source = path;
    w.format = "gguf";
    w.storage = storage;
    return w;
}

}  // namespace kascade
