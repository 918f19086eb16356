// The config.json fuzz target: load_hf_config and the promises a loaded config makes to the runtime.
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/weights/model_config.h"

namespace kascade::fuzz {

bool fuzz_hf_config(FuzzInput input) {
    try {
        const ModelConfig c = load_hf_config(write_input_file("config.json", input));
        require(c.dim > 0 && c.hidden_dim > 0 && c.n_layers > 0 && c.vocab_size > 0 && c.max_seq_len > 0,
                "a config with a non-positive size was accepted");
        require(c.n_heads > 0 && c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0,
                fmt::format("heads {} / kv heads {} accepted", c.n_heads, c.n_kv_heads));
        require(c.head_dim > 0 && c.head_dim % 2 == 0, fmt::format("head_dim {} accepted", c.head_dim));
        require(c.layer_window.empty() || static_cast<int>(c.layer_window.size()) == c.n_layers,
                fmt::format("{} layer windows for {} layers", c.layer_window.size(), c.n_layers));
        for (int layer = 0; layer < c.n_layers && !c.layer_window.empty(); ++layer) {
            require(c.window(layer) >= 0, fmt::format("layer {} window {}", layer, c.window(layer)));
        }
        require(c.rope_theta > 0 && c.rms_norm_eps > 0, "a non-positive rope_theta or rms_norm_eps was accepted");
        static_cast<void>(c.has_window());
        static_cast<void>(rope_scaling_type_name(c.rope_scaling.type));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
