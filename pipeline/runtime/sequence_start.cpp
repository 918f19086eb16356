#include "pipeline/runtime/sequence_start.h"

#include "base/error.h"

namespace kascade {

int32_t sequence_start_token(const ModelConfig& config, const Tokenizer* tokenizer) {
    const std::optional<bool> adds_bos = tokenizer ? tokenizer->adds_bos_token() : std::nullopt;
    if (!adds_bos.has_value()) return config.bos_token_id;
    if (!*adds_bos) return -1;
    const int32_t bos = tokenizer->bos_id() >= 0 ? tokenizer->bos_id() : config.bos_token_id;
    KASCADE_CHECK(bos >= 0,
                  "the tokenizer's tokenizer_config.json sets add_bos_token to true, but neither it (bos_token) nor "
                  "the model (bos_token_id) names a BOS token");
    return bos;
}

int32_t document_boundary_token(const ModelConfig& config, const Tokenizer* tokenizer) {
    const int32_t start = sequence_start_token(config, tokenizer);
    return start >= 0 ? start : config.eos_token_id;
}

}  // namespace kascade
