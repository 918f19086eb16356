// pipeline/runtime/batched_decode.h: the decode loop of a generation over several sequences at once. Each step asks
// every sequence still going for its next token (picked from its last logits by the caller: greedy, sampled, with the
// caller's own stop rules), runs the sequences that go on in one batched forward pass and LM head (the weights read
// once for all of them), and hands each its new logits. `kascade generate --batch` and the task stage's answers
// (generate_greedy_batch) both decode through it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/kv_cache.h"
#include "pipeline/runtime/transformer.h"

namespace kascade {

/// One sequence of a batched decode, prefilled: its cache, its decode policy (per-sequence state: no two sequences
/// share one) and the logits of its last position (vocab_size floats, replaced by each step it takes part in).
struct DecodingSequence {
    KvCache* cache = nullptr;
    AttentionPolicy* policy = nullptr;
    float* logits = nullptr;
};

/// What one sequence's decode took: the steps it took part in and their seconds (shared with the other sequences of
/// each step).
struct DecodeTally {
    int steps = 0;
    double seconds = 0;
};

/// Decodes until every sequence has ended. Before each step next_token(i) returns the token sequence i decodes next,
/// read from its logits, or nullopt when the sequence ends (it is not asked again). Each sequence's rows are computed
/// as a forward pass of that sequence alone computes them (Transformer::forward over several sequences), so its tokens
/// do not depend on the others.
std::vector<DecodeTally> decode_batched(const Transformer& model, std::span<const DecodingSequence> sequences,
                                        const std::function<std::optional<int32_t>(size_t)>& next_token);

}  // namespace kascade
