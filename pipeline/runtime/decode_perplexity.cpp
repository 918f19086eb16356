#include "pipeline/runtime/decode_perplexity.h"

#include <omp.h>

#include <cmath>

#include "base/error.h"
#include "kernels/log_sum_exp.h"

namespace kascade {

int64_t decode_window_tokens(const DecodeOptions& options, bool has_bos) {
    // P + D positions; with BOS the first is not text, without it one more text token is the last target.
    return static_cast<int64_t>(options.prompt_tokens) + options.decode_tokens + (has_bos ? 0 : 1);
}

void check_decode_counts(int prompt_tokens, int decode_tokens, int model_max_positions) {
    KASCADE_CHECK(prompt_tokens >= 1, "invalid prompt-tokens={} (must be >= 1)", prompt_tokens);
    KASCADE_CHECK(decode_tokens >= 1, "invalid decode-tokens={} (must be >= 1)", decode_tokens);
    KASCADE_CHECK(static_cast<int64_t>(prompt_tokens) + decode_tokens <= model_max_positions,
                  "prompt-tokens={} + decode-tokens={} is more than the model's context of {} positions "
                  "(max_position_embeddings)",
                  prompt_tokens, decode_tokens, model_max_positions);
}

std::vector<TokenWindow> make_decode_windows(int64_t n_text_tokens, const DecodeOptions& options, bool has_bos,
                                             int model_max_positions) {
    check_decode_counts(options.prompt_tokens, options.decode_tokens, model_max_positions);
    KASCADE_CHECK(options.offset >= 0, "invalid --offset {} (must be >= 0)", options.offset);
    KASCADE_CHECK(options.max_tokens >= 0, "invalid eval-tokens={} (must be >= 0)", options.max_tokens);
    int64_t end = n_text_tokens;
    if (options.max_tokens > 0) end = std::min(end, options.offset + options.max_tokens);
    const int64_t span = decode_window_tokens(options, has_bos);
    std::vector<TokenWindow> windows;
    for (int64_t b = options.offset; b + span <= end; b += span) windows.push_back({b, b + span});
    KASCADE_CHECK(!windows.empty(),
                  "test tokens [{}, {}) hold no whole decode window: prompt-tokens={} + decode-tokens={} needs {} "
                  "text tokens",
                  options.offset, end, options.prompt_tokens, options.decode_tokens, span);
    return windows;
}

PerplexityResult evaluate_decode_perplexity(const Transformer& model, AttentionPolicy& policy,
                                            std::span<const int32_t> text_tokens, int32_t start_token,
                                            const DecodeOptions& options, const WindowCallback& on_window) {
    const ModelConfig& c = model.config();
    const bool has_bos = start_token >= 0;
    const std::vector<TokenWindow> windows =
        make_decode_windows(static_cast<int64_t>(text_tokens.size()), options, has_bos, model.max_positions());
    const int P = options.prompt_tokens, D = options.decode_tokens;
    PerplexityResult result;
    DenseAttention prefill_policy;
    KvCache cache(c, P + D, options.kv_page_size, options.kv_dtype);
    std::vector<float> hidden(static_cast<size_t>(P) * c.dim);
    std::vector<float> logits(c.vocab_size);
    for (const TokenWindow& window : windows) {
        // P + D input positions: the last text token of the window is only the last decode position's target.
        const std::vector<int32_t> input = window_input(text_tokens, {window.begin, window.end - 1}, start_token);
        KASCADE_ASSERT(static_cast<int>(input.size()) == P + D);
        cache.clear();
        model.forward(std::span<const int32_t>(input).first(P), cache, prefill_policy, hidden.data());
        const double start = omp_get_wtime();
        double nll = 0;
        for (int i = 0; i < D; ++i) {
            model.forward(std::span<const int32_t>(input).subspan(P + i, 1), cache, policy, hidden.data(),
                          &result.stats);
            model.lm_head(hidden.data(), 1, logits.data(), &result.stats);
            nll += log_sum_exp(logits.data(), c.vocab_size) - logits[text_tokens[window.end - D + i]];
        }
        result.seconds += omp_get_wtime() - start;
        KASCADE_CHECK(std::isfinite(nll),
                      "model \"{}\" produced non-finite logits decoding the window of text tokens [{}, {}) (do its "
                      "weights hold NaN or inf?)",
                      model.source().string(), window.begin, window.end);
        result.nll_sum += nll;
        result.n_scored += D;
        ++result.n_windows;
        if (on_window) on_window(result.n_windows, result);
    }
    return result;
}

}  // namespace kascade
