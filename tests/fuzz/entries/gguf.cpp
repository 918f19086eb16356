// The GGUF fuzz target: the container (header, metadata of every type, tensor infos), the llama.* keys, every tensor
// dequantized and read through the loaded model's views, then the embedded tokenizer loaded and used.
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "entries/weight_checks.h"
#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"

namespace kascade::fuzz {

namespace {

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

void use_gguf_tokenizer(const Tokenizer& tokenizer) {
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
        use_gguf_tokenizer(*load_tokenizer(path));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
