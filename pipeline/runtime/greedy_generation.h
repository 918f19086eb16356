// pipeline/runtime/greedy_generation.h: a prompt's greedy continuation under an attention method: the prompt is
// prefilled in one pass (with the method, or densely), then each token is decoded through the method's decode
// policy until EOS, a newline or the token limit. Several prompts may be answered together: each is prefilled on its
// own and the sequences still generating decode one token each per batched forward pass. What the task stage scores,
// and what the task tests compare with a reference.
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
    double decode_s = 0;          ///< the decode steps this sequence took part in (batched: shared with the others)
    int decode_steps = 0;         ///< forward passes of one token of this sequence
};

/// One prompt of a batch: prefill attends the prompt (n_q == n_k from position 0); decode attends each generated
/// token. They may be the same policy object, but no two requests may share one (a policy keeps per-sequence state).
struct GreedyRequest {
    std::span<const int32_t> prompt;
    AttentionPolicy* prefill = nullptr;
    AttentionPolicy* decode = nullptr;
};

/// Answers every request; result i is what generate_greedy gives for request i alone, bit for bit (the batched
/// forward pass computes each sequence's rows as a forward pass of that sequence alone does).
std::vector<GreedyResult> generate_greedy_batch(const Transformer& model, const Tokenizer& tokenizer,
                                                std::span<const GreedyRequest> requests, const GreedyOptions& options);

/// One prompt: generate_greedy_batch of one request.
GreedyResult generate_greedy(const Transformer& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                             AttentionPolicy& prefill, AttentionPolicy& decode, const GreedyOptions& options);

}  // namespace kascade
