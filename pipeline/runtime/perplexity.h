// pipeline/runtime/perplexity.h: perplexity over non-overlapping windows of a token stream.
//
// The text tokens [offset, offset + max_tokens) are cut into consecutive windows. Where the model reads BOS first
// (sequence_start_token()) a window is BOS + (ctx - 1) text tokens, so every text token in the window is predicted and
// scored; without one a window is ctx text tokens and its first token is context only. The result is the mean negative
// log-likelihood (nats) over all scored tokens and exp of it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "pipeline/runtime/transformer.h"

namespace kascade {

struct PerplexityOptions {
    int ctx = 512;           ///< positions per window, BOS included
    int64_t offset = 0;      ///< first text token used
    int64_t max_tokens = 0;  ///< text tokens used (0: all after offset)
    /// The KV cache's element type (--kv-dtype): fp32, or BF16 (the keys and values rounded as they are stored).
    /// The one default of the option: every other options struct, the CLI and the sweep files take it from here.
    KvDType kv_dtype = KvDType::F32;
};

/// A window of the text stream: text tokens [begin, end), preceded by BOS when bos >= 0.
struct TokenWindow {
    int64_t begin = 0;
    int64_t end = 0;
};

/// Cuts text tokens into windows per `options`; checks ctx against the model and that there is text to score.
std::vector<TokenWindow> make_windows(int64_t n_text_tokens, const PerplexityOptions& options, bool has_bos,
                                      int model_max_positions);

/// The token ids a window feeds to the model (BOS first if bos >= 0).
std::vector<int32_t> window_input(std::span<const int32_t> text_tokens, const TokenWindow& window, int bos);

struct PerplexityResult {
    int64_t n_scored = 0;  ///< tokens whose prediction was scored
    double nll_sum = 0;    ///< nats
    int n_windows = 0;
    double seconds = 0;     ///< wall time of the forward passes and scoring
    double scoring_ms = 0;  ///< of which log-softmax scoring of the logits (after the LM head)
    ForwardStats stats;

    double mean_nll() const { return n_scored > 0 ? nll_sum / n_scored : 0; }
    double perplexity() const;
    double tokens_per_second() const { return seconds > 0 ? stats.tokens / seconds : 0; }
};

/// Called after each window with the number of windows done.
using WindowCallback = std::function<void(int windows_done, const PerplexityResult& so_far)>;

/// `start_token`: the token before each window's text (BOS), -1 for none; see sequence_start_token().
PerplexityResult evaluate_perplexity(const Transformer& model, AttentionPolicy& policy,
                                     std::span<const int32_t> text_tokens, int32_t start_token,
                                     const PerplexityOptions& options, const WindowCallback& on_window = {});

}  // namespace kascade
