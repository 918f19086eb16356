// pipeline/runtime/greedy_generation.cpp
#include "pipeline/runtime/greedy_generation.h"

#include <omp.h>

#include <algorithm>

#include "base/error.h"
#include "pipeline/runtime/kv_cache.h"

namespace kascade {

namespace {

/// The most likely token; the lowest id among equal maxima (as torch.argmax).
int32_t argmax(const std::vector<float>& logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

GreedyResult generate_greedy(const Transformer& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                             AttentionPolicy& prefill, AttentionPolicy& decode, const GreedyOptions& options) {
    const ModelConfig& c = model.config();
    KASCADE_CHECK(!prompt.empty(), "nothing to generate from: the prompt has no tokens");
    KASCADE_CHECK(options.max_new_tokens >= 1, "invalid max-new-tokens={} (must be >= 1)", options.max_new_tokens);
    const int positions = static_cast<int>(prompt.size()) + options.max_new_tokens;
    KASCADE_CHECK(positions <= c.max_seq_len,
                  "prompt ({} tokens) + {} new tokens = {} positions exceeds the model's context of {} "
                  "(max_position_embeddings)",
                  prompt.size(), options.max_new_tokens, positions, c.max_seq_len);

    KvCache cache(c, positions, std::max(prefill.kv_page_size(), decode.kv_page_size()), options.kv_dtype);
    std::vector<float> hidden(prompt.size() * static_cast<size_t>(c.dim));
    std::vector<float> logits(c.vocab_size);
    GreedyResult r;
    double t0 = omp_get_wtime();
    model.forward(prompt, cache, prefill, hidden.data());
    model.lm_head(hidden.data() + (prompt.size() - 1) * c.dim, 1, logits.data());
    r.prefill_s = omp_get_wtime() - t0;

    t0 = omp_get_wtime();
    int32_t prev = prompt.back();
    while (true) {
        const int32_t next = argmax(logits);
        if (next == c.eos_token_id || next == c.bos_token_id || next == tokenizer.eos_id()) break;
        const std::string piece = tokenizer.decode_piece(prev, next);
        if (options.stop_at_newline) {
            if (const size_t nl = piece.find('\n'); nl != std::string::npos) {
                r.text += piece.substr(0, nl);
                break;
            }
        }
        r.tokens.push_back(next);
        r.text += piece;
        prev = next;
        if (static_cast<int>(r.tokens.size()) == options.max_new_tokens) break;
        model.forward(std::span<const int32_t>(&next, 1), cache, decode, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data());
        ++r.decode_steps;
    }
    r.decode_s = omp_get_wtime() - t0;
    return r;
}

}  // namespace kascade
