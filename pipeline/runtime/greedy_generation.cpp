// pipeline/runtime/greedy_generation.cpp
#include "pipeline/runtime/greedy_generation.h"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "base/error.h"
#include "pipeline/runtime/batched_decode.h"
#include "pipeline/runtime/kv_cache.h"

namespace kascade {

namespace {

/// The most likely token; the lowest id among equal maxima (as torch.argmax).
int32_t argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

/// A sequence being answered: its cache, the logits of its last position, the token before the next one.
struct Answering {
    std::unique_ptr<KvCache> cache;
    std::vector<float> logits;
    int32_t prev = 0;
    int32_t next = 0;
};

/// Takes a's next token (the argmax of its logits) into r, or ends a at a stop token, a newline or the token limit.
/// Returns whether a goes on to a decode step with a.next.
bool take_next_token(const ModelConfig& c, const Tokenizer& tokenizer, const GreedyOptions& options, Answering& a,
                     GreedyResult& r) {
    a.next = argmax(a.logits);
    if (a.next == c.eos_token_id || a.next == c.bos_token_id || a.next == tokenizer.eos_id()) return false;
    const std::string piece = tokenizer.decode_piece(a.prev, a.next);
    if (options.stop_at_newline) {
        if (const size_t nl = piece.find('\n'); nl != std::string::npos) {
            r.text += piece.substr(0, nl);
            return false;
        }
    }
    r.tokens.push_back(a.next);
    r.text += piece;
    a.prev = a.next;
    return static_cast<int>(r.tokens.size()) < options.max_new_tokens;
}

}  // namespace

std::vector<GreedyResult> generate_greedy_batch(const Transformer& model, const Tokenizer& tokenizer,
                                                std::span<const GreedyRequest> requests, const GreedyOptions& options) {
    const ModelConfig& c = model.config();
    KASCADE_CHECK(!requests.empty(), "nothing to generate: no prompt");
    KASCADE_CHECK(options.max_new_tokens >= 1, "invalid max-new-tokens={} (must be >= 1)", options.max_new_tokens);
    size_t longest = 0;
    for (const GreedyRequest& q : requests) {
        KASCADE_ASSERT(q.prefill != nullptr && q.decode != nullptr);
        KASCADE_CHECK(!q.prompt.empty(), "nothing to generate from: the prompt has no tokens");
        const int64_t positions = static_cast<int64_t>(q.prompt.size()) + options.max_new_tokens;
        KASCADE_CHECK(positions <= c.max_seq_len,
                      "prompt ({} tokens) + {} new tokens = {} positions exceeds the model's context of {} "
                      "(max_position_embeddings)",
                      q.prompt.size(), options.max_new_tokens, positions, c.max_seq_len);
        longest = std::max(longest, q.prompt.size());
    }
    const size_t vocab = static_cast<size_t>(c.vocab_size);
    std::vector<float> hidden(longest * static_cast<size_t>(c.dim));  // the rows of the longest prompt's prefill
    std::vector<GreedyResult> results(requests.size());
    std::vector<Answering> seqs(requests.size());

    // Each prompt is prefilled on its own: batching long prompts would only multiply the activation buffers.
    for (size_t i = 0; i < requests.size(); ++i) {
        const GreedyRequest& q = requests[i];
        Answering& a = seqs[i];
        const int positions = static_cast<int>(q.prompt.size()) + options.max_new_tokens;
        a.cache = std::make_unique<KvCache>(c, positions, std::max(q.prefill->kv_page_size(), q.decode->kv_page_size()),
                                            options.kv_dtype);
        a.logits.resize(vocab);
        a.prev = q.prompt.back();
        const double t0 = omp_get_wtime();
        model.forward(q.prompt, *a.cache, *q.prefill, hidden.data());
        model.lm_head(hidden.data() + (q.prompt.size() - 1) * c.dim, 1, a.logits.data());
        results[i].prefill_s = omp_get_wtime() - t0;
    }

    std::vector<DecodingSequence> decoding;
    for (size_t i = 0; i < seqs.size(); ++i)
        decoding.push_back({seqs[i].cache.get(), requests[i].decode, seqs[i].logits.data()});
    const std::vector<DecodeTally> tallies = decode_batched(model, decoding, [&](size_t i) -> std::optional<int32_t> {
        Answering& a = seqs[i];
        if (!take_next_token(c, tokenizer, options, a, results[i])) return std::nullopt;
        return a.next;
    });
    for (size_t i = 0; i < seqs.size(); ++i) {
        results[i].decode_s = tallies[i].seconds;
        results[i].decode_steps = tallies[i].steps;
    }
    return results;
}

GreedyResult generate_greedy(const Transformer& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                             AttentionPolicy& prefill, AttentionPolicy& decode, const GreedyOptions& options) {
    const GreedyRequest request{prompt, &prefill, &decode};
    return std::move(generate_greedy_batch(model, tokenizer, std::span(&request, 1), options).front());
}

}  // namespace kascade
