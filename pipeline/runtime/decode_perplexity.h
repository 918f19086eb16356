// pipeline/runtime/decode_perplexity.h: perplexity of tokens generated one at a time (teacher forcing).
//
// The text tokens [offset, offset + max_tokens) are cut into windows. Each window prefills prompt_tokens positions
// (BOS first where the model reads one, see sequence_start_token()) in one dense pass, then runs decode_tokens
// positions one token at a time through the policy under test, feeding the text's own tokens; the next-token
// prediction of every decode position is scored. So each decode step sees exactly the cache a generating model
// would, and only decode steps are timed: tokens/s is decode throughput.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pipeline/runtime/perplexity.h"

namespace kascade {

struct DecodeOptions {
    int prompt_tokens = 256;  ///< positions prefilled densely per window (BOS included)
    int decode_tokens = 256;  ///< positions then run one at a time, each prediction scored
    int64_t offset = 0;       ///< first text token used
    int64_t max_tokens = 0;   ///< text tokens used (0: all after offset); only whole windows are scored
    int kv_page_size = 0;     ///< the KV cache's page size (AttentionPolicy::kv_page_size() of the decode policy)
    KvDType kv_dtype = PerplexityOptions{}.kv_dtype;  ///< the KV cache's element type (--kv-dtype)
};

/// Checks the decode counts of a window: at least one prompt and one decode position, and the window within the
/// model's context. The one check of them, for eval's resolve and the window maker alike.
void check_decode_counts(int prompt_tokens, int decode_tokens, int model_max_positions);

/// Text tokens one window reads: the prompt's and the decode positions' inputs and the last position's target.
int64_t decode_window_tokens(const DecodeOptions& options, bool has_bos);

/// Cuts text tokens into whole decode windows; checks the counts against the model and that one window fits.
std::vector<TokenWindow> make_decode_windows(int64_t n_text_tokens, const DecodeOptions& options, bool has_bos,
                                             int model_max_positions);

/// Prefills each window with DenseAttention and decodes with `policy`. In the result, seconds and stats cover the
/// decode steps only (forward, LM head and scoring), n_scored = decode_tokens per window.
PerplexityResult evaluate_decode_perplexity(const Transformer& model, AttentionPolicy& policy,
                                            std::span<const int32_t> text_tokens, int32_t start_token,
                                            const DecodeOptions& options, const WindowCallback& on_window = {});

}  // namespace kascade
