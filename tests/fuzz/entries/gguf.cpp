// The GGUF fuzz target: the container (header, metadata of every type, tensor infos), the llama.* keys, every tensor
// dequantized and read through the loaded model's views, then the embedded tokenizer loaded and used.
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"

namespace kascade::fuzz {

namespace {

void read_matrix(const WeightMatrix& m, int rows, int cols, std::string_view what) {
    require(m.data != nullptr && m.rows == rows && m.cols == cols,
            fmt::format("{}: [{}, {}] where the config says [{}, {}]", what, m.rows, m.cols, rows, cols));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (int r = 0; r < rows; ++r) weight_row_to_f32(m, r, row.data());
}

float read_vector(const float* v, int n, std::string_view what) {
    require(v != nullptr, fmt::format("{} is missing", what));
    float sum = 0;
    for (int i = 0; i < n; ++i) sum += v[i];
    return sum;
}

void use_model(const ModelWeights& w) {
    const ModelConfig& c = w.config;
    require(c.dim > 0 && c.hidden_dim > 0 && c.n_layers > 0 && c.vocab_size > 0 && c.head_dim > 0 && c.n_kv_heads > 0 &&
                c.n_heads % c.n_kv_heads == 0 && static_cast<int>(w.layers.size()) == c.n_layers,
            fmt::format("an inconsistent config was accepted: dim {}, heads {}/{}", c.dim, c.n_heads, c.n_kv_heads));
    const int q_dim = c.n_heads * c.head_dim;
    const int kv_dim = c.n_kv_heads * c.head_dim;
    read_matrix(w.embed, c.vocab_size, c.dim, "embedding");
    read_matrix(w.lm_head, c.vocab_size, c.dim, "lm_head");
    float sum = read_vector(w.final_norm, c.dim, "final norm");
    for (const LayerWeights& l : w.layers) {
        sum += read_vector(l.attn_norm, c.dim, "attention norm") + read_vector(l.mlp_norm, c.dim, "MLP norm");
        read_matrix(l.wq, q_dim, c.dim, "wq");
        read_matrix(l.wk, kv_dim, c.dim, "wk");
        read_matrix(l.wv, kv_dim, c.dim, "wv");
        read_matrix(l.wo, c.dim, q_dim, "wo");
        read_matrix(l.w_gate, c.hidden_dim, c.dim, "w_gate");
        read_matrix(l.w_up, c.hidden_dim, c.dim, "w_up");
        read_matrix(l.w_down, c.dim, c.hidden_dim, "w_down");
    }
    static_cast<void>(sum);
}

void use_tokenizer(const Tokenizer& tokenizer) {
    const int vocab = tokenizer.vocab_size();
    require(vocab > 0, "a tokenizer with an empty vocabulary was accepted");
    require(tokenizer.bos_id() >= -1 && tokenizer.bos_id() < vocab, fmt::format("bos id {}", tokenizer.bos_id()));
    try {
        const std::vector<std::int32_t> ids =
            tokenizer.encode("Once upon a time, 42 cats said \"héllo\" 日本 🙂\n");
        for (const std::int32_t id : ids) require(id >= 0 && id < vocab, fmt::format("encode gave id {}", id));
        static_cast<void>(tokenizer.decode(ids));
    } catch (const kascade::Error&) {
        // A vocabulary may lack a piece for some of the text (no byte tokens, no unknown token).
    }
    for (std::int32_t id = 0; id < vocab && id < 4096; ++id) static_cast<void>(tokenizer.decode_piece(-1, id));
}

}  // namespace

bool fuzz_gguf(FuzzInput input) {
    const std::filesystem::path path = write_input_file("model.gguf", input);
    try {
        use_model(load_model(path));
    } catch (const kascade::Error&) {
        return false;
    }
    try {
        use_tokenizer(*load_tokenizer(path));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
