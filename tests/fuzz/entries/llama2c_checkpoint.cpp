// The llama2.c checkpoint fuzz target: the 7-int32 header and the weight layout it implies; every weight the
// loaded model points at is then read, so a view reaching past the file faults here rather than in a forward pass.
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "entries/weight_checks.h"
#include "io/weights/model_weights.h"

namespace kascade::fuzz {

bool fuzz_llama2c_checkpoint(FuzzInput input) {
    try {
        const ModelWeights w = load_model(write_input_file("model.bin", input));
        const ModelConfig& c = w.config;
        require(c.dim > 0 && c.hidden_dim > 0 && c.n_layers > 0 && c.vocab_size > 0 && c.max_seq_len > 0,
                "a checkpoint with a non-positive size was accepted");
        require(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0 && c.head_dim > 0,
                fmt::format("heads {} / kv heads {} / head_dim {} accepted", c.n_heads, c.n_kv_heads, c.head_dim));
        require(static_cast<int>(w.layers.size()) == c.n_layers,
                fmt::format("{} layers loaded for n_layers {}", w.layers.size(), c.n_layers));
        const int q_dim = c.n_heads * c.head_dim;
        const int kv_dim = c.n_kv_heads * c.head_dim;
        read_matrix(w.embed, c.vocab_size, c.dim, "embedding");
        read_matrix(w.lm_head, c.vocab_size, c.dim, "lm_head");
        read_vector(w.final_norm, c.dim, "final norm");
        for (const LayerWeights& l : w.layers) {
            read_vector(l.attn_norm, c.dim, "attention norm");
            read_vector(l.mlp_norm, c.dim, "MLP norm");
            read_matrix(l.wq, q_dim, c.dim, "wq");
            read_matrix(l.wk, kv_dim, c.dim, "wk");
            read_matrix(l.wv, kv_dim, c.dim, "wv");
            read_matrix(l.wo, c.dim, q_dim, "wo");
            read_matrix(l.w_gate, c.hidden_dim, c.dim, "w_gate");
            read_matrix(l.w_up, c.hidden_dim, c.dim, "w_up");
            read_matrix(l.w_down, c.dim, c.hidden_dim, "w_down");
        }
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
