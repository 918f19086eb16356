// pipeline/runtime/greedy_generation.h: a prompt's greedy continuation under an attention method: the prompt is
// prefilled in one pass (with the method, or densely), then each token is decoded through the method's decode
// policy until EOS, a newline or the token limit. What the task stage scores, and what `kascade generate` and
// the task tests compare with a reference.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/tokenizer/tokenizer.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/transformer.h"

namespace kascade {

struct GreedyOptions {
    int max_new_tokens = 16;
    bool stop_at_newline = true;  ///< the answer ends at its first "\n" (the newline is not part of it)
    KvDType kv_dtype = PerplexityOptions{}.kv_dtype;  ///< the KV cache's element type (--kv-dtype)
};

struct GreedyResult {
    std::vector<int32_t> tokens;  ///< generated ids, without the stop token
    std::string text;             ///< their text (cut before a newline)
    double prefill_s = 0;         ///< the prompt's forward pass and the first token's logits
    double decode_s = 0;          ///< the decode steps
    int decode_steps = 0;         ///< forward passes of one token
};

/// prefill attends the prompt (n_q == n_k from position 0); decode attends each generated token. They may be the
/// same policy object. kv_page_size: what the decode policy needs the cache to keep (AttentionPolicy).
GreedyResult generate_greedy(const Transformer& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                             AttentionPolicy& prefill, AttentionPolicy& decode, const GreedyOptions& options);

}  // namespace kascade
