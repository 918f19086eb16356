// io/weights/meta_checkpoint.cpp: Meta's tensor names and model-parallel shards mapped onto ModelWeights, with shape
// checks against params.json.
#include "io/weights/meta_checkpoint.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "io/weights/safetensors.h"
#include "io/weights/torch_checkpoint.h"
#include "io/weights/weight_storage.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;

constexpr const char* kParamsFile = "params.json";

// How Meta's model-parallel layers (fairscale) split a weight over the shards: ColumnParallelLinear splits the
// output features (rows: wq, wk, wv, w1, w3, output), RowParallelLinear the input features (columns: wo, w2);
// ParallelEmbedding (Llama 2) splits the embedding's columns, VocabParallelEmbedding (Llama 3) its rows. Norms are
// whole in every shard.
enum class Split { Whole, Rows, Columns };

std::string_view split_name(Split split) {
    switch (split) {
        case Split::Whole:
            return "whole";
        case Split::Rows:
            return "by rows";
        case Split::Columns:
            return "by columns";
    }
    return "?";
}

// Meta's model.py applies RoPE to the pairs (2i, 2i + 1) of each head; Hugging Face's layout, which its converter
// makes by permuting the rows of wq and wk, pairs (i, i + head_dim / 2). Row r of a Meta matrix goes to this row.
// kascade's transformer runs either layout, but with the rows reordered a Meta folder and its Hugging Face
// conversion run the very same arithmetic (the same logits to the bit, the same captured q and k).
std::int64_t rotate_half_row(std::int64_t r, std::int64_t head_dim) {
    const std::int64_t head = r / head_dim, k = r % head_dim;
    return head * head_dim + (k % 2) * (head_dim / 2) + k / 2;
}

std::string shard_name(int index) {
    return fmt::format("consolidated.{:02d}.pth", index);
}

// The index NN of a file named consolidated.NN.pth, or -1.
int shard_number(const std::string& name) {
    constexpr std::string_view prefix = "consolidated.", suffix = ".pth";
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) {
        return -1;
    }
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return -1;
    const int n = std::stoi(digits);
    return shard_name(n) == name ? n : -1;  // numbered as Meta numbers them: two digits at least, no other zeros
}

// The shard files of `dir`, in order; they must be numbered 0, 1, ... without a gap.
std::vector<fs::path> shard_files(const fs::path& dir) {
    std::set<int> numbers;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const int n = shard_number(entry.path().filename().string());
        if (n >= 0) numbers.insert(n);
    }
    KASCADE_CHECK(!numbers.empty(), "{}: no consolidated.NN.pth file", dir.string());
    std::vector<fs::path> files;
    for (int i = 0; i <= *numbers.rbegin(); ++i) {
        KASCADE_CHECK(numbers.count(i),
                      "{}: {} is missing (the last shard is {}): model-parallel shards are numbered "
                      "from 00 without a gap",
                      dir.string(), shard_name(i), shard_name(*numbers.rbegin()));
        files.push_back(dir / shard_name(i));
    }
    return files;
}

// Looks Meta's tensors up in every shard, checks their shapes against params.json and places them, joined over the
// shards (weight_storage.h).
class ShardedTensors {
  public:
    ShardedTensors(const std::vector<std::shared_ptr<TorchCheckpoint>>& shards, const fs::path& params,
                   WeightStorage& storage, WeightPlacement& placement)
        : shards_(shards), params_(params.string()), storage_(storage), placement_(placement) {}

    int count() const { return static_cast<int>(shards_.size()); }
    bool contains(const std::string& name) const { return shards_[0]->find(name) != nullptr; }
    /// The shape of `name` in the first shard (which must hold it).
    const std::vector<std::int64_t>& first_shape(const std::string& name) const { return shard(0, name).shape; }

    /// A norm weight, whole in every shard: the first shard's, as fp32.
    const float* vector(const std::string& name, std::int64_t size, const std::string& fields) {
        const TorchTensor& t = checked(0, name, {size}, {size}, Split::Whole, fields);
        for (int s = 1; s < count(); ++s) checked(s, name, {size}, {size}, Split::Whole, fields);
        return placement_.vector(t.dtype, t.data, t.numel);
    }

    /// A [rows][cols] matrix split over the shards as `split` says. With `rotary_head_dim` > 0 (wq, wk) its rows
    /// are reordered from Meta's RoPE layout to rotate-half (rotate_half_row).
    WeightMatrix matrix(const std::string& name, std::int64_t rows, std::int64_t cols, Split split,
                        const std::string& fields, std::int64_t rotary_head_dim = 0) {
        const std::int64_t n = count();
        const std::vector<std::int64_t> part = {split == Split::Rows ? rows / n : rows,
                                                split == Split::Columns ? cols / n : cols};
        const bool divisible = (split != Split::Rows || rows % n == 0) && (split != Split::Columns || cols % n == 0);
        std::vector<const TorchTensor*> parts;
        for (int s = 0; s < count(); ++s) {
            parts.push_back(
                &checked(s, name, {rows, cols}, divisible ? part : std::vector<std::int64_t>{}, split, fields));
            KASCADE_CHECK(parts.back()->dtype == parts[0]->dtype, "{}: tensor {} is {} there but {} in {}",
                          shards_[s]->path().string(), name, dtype_name(parts.back()->dtype),
                          dtype_name(parts[0]->dtype), shards_[0]->path().string());
        }
        const DType dtype = parts[0]->dtype;
        if (count() == 1 && rotary_head_dim == 0) {
            return placement_.matrix(dtype, parts[0]->data, static_cast<int>(rows), static_cast<int>(cols));
        }
        // Joined (and reordered) into one buffer in the file's dtype, then placed like a file's tensor.
        const std::size_t element = dtype_size(dtype);
        std::uint8_t* joined = storage_.allocate(static_cast<std::size_t>(rows * cols) * element);
        const std::size_t part_row_bytes = static_cast<std::size_t>(part[1]) * element;
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t to = rotary_head_dim > 0 ? rotate_half_row(r, rotary_head_dim) : r;
            std::uint8_t* dst = joined + static_cast<std::size_t>(to * cols) * element;
            if (split == Split::Columns) {
                for (int s = 0; s < count(); ++s) {
                    std::memcpy(dst + s * part_row_bytes, parts[s]->data + r * part_row_bytes, part_row_bytes);
                }
            } else {
                std::memcpy(dst, parts[r / part[0]]->data + (r % part[0]) * part_row_bytes, part_row_bytes);
            }
        }
        return placement_.matrix(dtype, joined, static_cast<int>(rows), static_cast<int>(cols));
    }

    /// Every tensor of any shard that no vector() or matrix() call took, except RoPE's saved frequencies.
    std::vector<std::string> unused() const {
        std::vector<std::string> names;
        for (const auto& shard : shards_) {
            for (const auto& [name, tensor] : shard->tensors()) {
                if (!used_.count(name) && name != "rope.freqs" && !std::count(names.begin(), names.end(), name))
                    names.push_back(name);
            }
        }
        return names;
    }

  private:
    // A matrix part that is a fraction 1/k of the whole with k above the number of shards means shards are missing
    // (the last ones: a gap in the numbering is refused before).
    std::string missing_shards_hint(const std::vector<std::int64_t>& shape,
                                    const std::vector<std::int64_t>& whole) const {
        if (shape.size() != 2 || whole.size() != 2) return {};
        for (int d = 0; d < 2; ++d) {
            if (shape[1 - d] == whole[1 - d] && shape[d] > 0 && whole[d] % shape[d] == 0 &&
                whole[d] / shape[d] > count())
                return fmt::format(" (it holds 1/{} of that and the folder has {} shard(s): are shards missing?)",
                                   whole[d] / shape[d], count());
        }
        return {};
    }

    const TorchTensor& shard(int s, const std::string& name) const {
        const TorchTensor* t = shards_[s]->find(name);
        KASCADE_CHECK(t != nullptr, "{}: tensor {} is missing", shards_[s]->path().string(), name);
        return *t;
    }

    // Shard s's part of `name`: present, of shape `part` (empty when `whole` does not divide over the shards), and
    // finite.
    const TorchTensor& checked(int s, const std::string& name, const std::vector<std::int64_t>& whole,
                               const std::vector<std::int64_t>& part, Split split, const std::string& fields) {
        used_.insert(name);
        const TorchTensor& t = shard(s, name);
        if (t.shape != part) {
            std::string expected = shape_string(whole);
            if (count() > 1 && split != Split::Whole) {
                expected += fmt::format(" split {} over the {} shards, {}", split_name(split), count(),
                                        part.empty() ? "which does not divide it" : shape_string(part) + " in each");
            }
            KASCADE_FAIL("{}: tensor {} has shape {}, but {} ({}) implies {}{}", shards_[s]->path().string(), name,
                         shape_string(t.shape), params_, fields, expected, missing_shards_hint(t.shape, whole));
        }
        // A NaN or infinity is refused at load, as the other loaders do: the attention kernels would turn it into a
        // plausible perplexity.
        const std::size_t bad = first_non_finite(t.dtype, t.data, t.numel);
        KASCADE_CHECK(bad == t.numel, "{}: tensor {} holds a non-finite value (NaN or infinity) at element {}",
                      shards_[s]->path().string(), name, bad);
        return t;
    }

    const std::vector<std::shared_ptr<TorchCheckpoint>>& shards_;
    std::string params_;
    WeightStorage& storage_;
    WeightPlacement& placement_;
    std::set<std::string> used_;
};

// Meta's special tokens, which params.json does not name: Llama 3's tiktoken vocabulary (128,256 ids) has
// <|begin_of_text|> and <|end_of_text|> right after its 128,000 ranks; Llama 1 and 2's SentencePiece model has
// <s> = 1 and </s> = 2 (the ids Hugging Face's converter writes into config.json for each).
constexpr int kLlama3Vocab = 128256;
void set_special_tokens(ModelConfig& c) {
    if (c.vocab_size >= kLlama3Vocab) {
        c.bos_token_id = 128000;
        c.eos_token_id = 128001;
    } else if (c.vocab_size > 2) {
        c.bos_token_id = 1;
        c.eos_token_id = 2;
    }
}

}  // namespace

bool is_meta_checkpoint_dir(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / kParamsFile, ec)) return false;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (shard_number(entry.path().filename().string()) >= 0) return true;
    }
    return false;
}

ModelWeights load_meta_checkpoint(const fs::path& dir, const LoadOptions& options) {
    const fs::path params = dir / kParamsFile;
    ModelWeights w;
    w.config = load_meta_params(params);
    ModelConfig& c = w.config;
    auto storage = std::make_shared<WeightStorage>();
    std::vector<std::shared_ptr<TorchCheckpoint>> shards;
    for (const fs::path& file : shard_files(dir)) {
        shards.push_back(std::make_shared<TorchCheckpoint>(file));
        storage->sources.push_back(shards.back());
    }
    WeightPlacement placement(*storage, options.weights_dtype);
    ShardedTensors fetch(shards, params, *storage, placement);

    const std::int64_t dim = c.dim;
    const std::int64_t n = fetch.count();
    // The embedding's split tells Llama 2's ParallelEmbedding (columns) from Llama 3's VocabParallelEmbedding
    // (rows); with vocab_size -1 the vocabulary is the joined embedding's rows.
    const std::string embed_name = "tok_embeddings.weight";
    const std::vector<std::int64_t>& embed_part = fetch.first_shape(embed_name);
    KASCADE_CHECK(embed_part.size() == 2, "{}: tensor {} has shape {}, expected [vocab_size, dim]",
                  shards[0]->path().string(), embed_name, shape_string(embed_part));
    const Split embed_split = n > 1 && embed_part[1] != dim ? Split::Columns : Split::Rows;
    if (c.vocab_size == 0) {
        const std::int64_t vocab = embed_split == Split::Rows ? embed_part[0] * n : embed_part[0];
        KASCADE_CHECK(vocab > 0 && vocab <= INT32_MAX, "{}: tensor {} has shape {}: no vocabulary size follows",
                      shards[0]->path().string(), embed_name, shape_string(embed_part));
        c.vocab_size = static_cast<int>(vocab);
    }
    set_special_tokens(c);
    const std::int64_t vocab = c.vocab_size;
    const std::int64_t hidden = c.hidden_dim;
    const std::int64_t q_rows = static_cast<std::int64_t>(c.n_heads) * c.head_dim;
    const std::int64_t kv_rows = static_cast<std::int64_t>(c.n_kv_heads) * c.head_dim;
    // What each shape follows from, for the messages.
    const std::string vocab_fields = fmt::format("vocab_size = {}, dim = {}", c.vocab_size, c.dim);
    const std::string q_fields = fmt::format("dim = {}, n_heads = {}", c.dim, c.n_heads);
    const std::string kv_fields =
        fmt::format("dim = {}, n_heads = {}, n_kv_heads = {}", c.dim, c.n_heads, c.n_kv_heads);
    const std::string ffn_fields =
        fmt::format("dim = {} with multiple_of and ffn_dim_multiplier: FFN width {}", c.dim, c.hidden_dim);
    const std::string dim_field = fmt::format("dim = {}", c.dim);

    w.embed = fetch.matrix(embed_name, vocab, dim, embed_split, vocab_fields);
    w.layers.resize(c.n_layers);
    for (int i = 0; i < c.n_layers; ++i) {
        LayerWeights& l = w.layers[i];
        const std::string p = fmt::format("layers.{}.", i);
        KASCADE_CHECK(fetch.contains(p + "attention.wq.weight"),
                      "{}: tensor {}attention.wq.weight is missing: {} says n_layers = {}", shards[0]->path().string(),
                      p, params.string(), c.n_layers);
        l.attn_norm = fetch.vector(p + "attention_norm.weight", dim, dim_field);
        l.wq = fetch.matrix(p + "attention.wq.weight", q_rows, dim, Split::Rows, q_fields, c.head_dim);
        l.wk = fetch.matrix(p + "attention.wk.weight", kv_rows, dim, Split::Rows, kv_fields, c.head_dim);
        l.wv = fetch.matrix(p + "attention.wv.weight", kv_rows, dim, Split::Rows, kv_fields);
        l.wo = fetch.matrix(p + "attention.wo.weight", dim, q_rows, Split::Columns, q_fields);
        l.mlp_norm = fetch.vector(p + "ffn_norm.weight", dim, dim_field);
        l.w_gate = fetch.matrix(p + "feed_forward.w1.weight", hidden, dim, Split::Rows, ffn_fields);
        l.w_down = fetch.matrix(p + "feed_forward.w2.weight", dim, hidden, Split::Columns, ffn_fields);
        l.w_up = fetch.matrix(p + "feed_forward.w3.weight", hidden, dim, Split::Rows, ffn_fields);
    }
    c.rope_layout = RopeLayout::RotateHalf;  // wq and wk were reordered above
    w.final_norm = fetch.vector("norm.weight", dim, dim_field);
    // A checkpoint without output.weight shares the embedding as the LM head.
    c.tie_word_embeddings = !fetch.contains("output.weight");
    w.lm_head = c.tie_word_embeddings ? w.embed : fetch.matrix("output.weight", vocab, dim, Split::Rows, vocab_fields);
    // A tensor params.json does not account for means it describes another model (fewer layers): loading the rest
    // would run a different network without a word.
    const std::vector<std::string> unused = fetch.unused();
    KASCADE_CHECK(unused.empty(),
                  "{}: {} tensor(s) are not used by the model {} describes, e.g. {} (n_layers = {}): params.json and "
                  "the weights do not belong together",
                  dir.string(), unused.size(), params.string(), unused.front(), c.n_layers);
    placement.finish();
    w.weights_dtype = options.weights_dtype;
    w.source = dir;
    w.format = "meta";
    w.storage = storage;
    return w;
}

}  // namespace kascade
