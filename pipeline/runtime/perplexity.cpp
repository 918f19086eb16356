#include "pipeline/runtime/perplexity.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/log_sum_exp.h"

namespace kascade {

namespace {
/// Bytes of logits computed at once. The LM head is the largest matrix; each chunk streams it once, and the
/// product runs faster on more rows (measured on SmolLM2-135M: 128 rows instead of 32 took 10 % off the matrix-product
/// time of a window), while the buffer stays bounded for 100K+ vocabularies.
constexpr size_t kLogitChunkBytes = size_t{32} << 20;
/// Rows per LM-head chunk for a vocabulary: as many as kLogitChunkBytes holds, within [16, 128].
int logit_rows_per_chunk(int vocab_size) {
    return static_cast<int>(std::clamp<size_t>(kLogitChunkBytes / (sizeof(float) * vocab_size), 16, 128));
}
}  // namespace

std::vector<TokenWindow> make_windows(int64_t n_text_tokens, const PerplexityOptions& options, bool has_bos,
                                      int model_max_positions) {
    KASCADE_CHECK(options.ctx >= 2, "invalid --ctx {} (must be at least 2)", options.ctx);
    KASCADE_CHECK(options.ctx <= model_max_positions,
                  "--ctx {} is larger than the model's context of {} positions (max_position_embeddings)", options.ctx,
                  model_max_positions);
    KASCADE_CHECK(options.offset >= 0, "invalid --offset {} (must be >= 0)", options.offset);
    KASCADE_CHECK(options.max_tokens >= 0, "invalid --max-tokens {} (must be >= 0)", options.max_tokens);
    KASCADE_CHECK(options.offset < n_text_tokens, "--offset {} is past the end of the text ({} tokens)", options.offset,
                  n_text_tokens);
    int64_t end = n_text_tokens;
    if (options.max_tokens > 0) end = std::min(end, options.offset + options.max_tokens);
    const int64_t per_window = has_bos ? options.ctx - 1 : options.ctx;
    std::vector<TokenWindow> windows;
    for (int64_t b = options.offset; b < end; b += per_window) windows.push_back({b, std::min(end, b + per_window)});
    // Without BOS a one-token window scores nothing; drop it rather than report a window that measured nothing.
    if (!has_bos && !windows.empty() && windows.back().end - windows.back().begin < 2) windows.pop_back();
    KASCADE_CHECK(!windows.empty(), "the text has too few tokens to score (need at least 2 after --offset {})",
                  options.offset);
    return windows;
}

std::vector<int32_t> window_input(std::span<const int32_t> text_tokens, const TokenWindow& window, int bos) {
    std::vector<int32_t> input;
    input.reserve(window.end - window.begin + 1);
    if (bos >= 0) input.push_back(bos);
    input.insert(input.end(), text_tokens.begin() + window.begin, text_tokens.begin() + window.end);
    return input;
}

double PerplexityResult::perplexity() const {
    return std::exp(mean_nll());
}

PerplexityResult evaluate_perplexity(const Transformer& model, AttentionPolicy& policy,
                                     std::span<const int32_t> text_tokens, int32_t start_token,
                                     const PerplexityOptions& options, const WindowCallback& on_window) {
    const ModelConfig& c = model.config();
    const int bos = start_token;
    const std::vector<TokenWindow> windows =
        make_windows(static_cast<int64_t>(text_tokens.size()), options, bos >= 0, model.max_positions());
    PerplexityResult result;
    KvCache cache(c, options.ctx, 0, options.kv_dtype);
    std::vector<float> hidden(static_cast<size_t>(options.ctx) * c.dim);
    const int chunk_rows = logit_rows_per_chunk(c.vocab_size);
    std::vector<float> logits(static_cast<size_t>(chunk_rows) * c.vocab_size);
    const double start = omp_get_wtime();
    for (const TokenWindow& window : windows) {
        const std::vector<int32_t> input = window_input(text_tokens, window, bos);
        const int n = static_cast<int>(input.size());
        cache.clear();
        model.forward(input, cache, policy, hidden.data(), &result.stats);
        // Row i predicts input[i + 1].
        for (int row0 = 0; row0 < n - 1; row0 += chunk_rows) {
            const int rows = std::min(chunk_rows, n - 1 - row0);
            model.lm_head(hidden.data() + static_cast<size_t>(row0) * c.dim, rows, logits.data(), &result.stats);
            double chunk_nll = 0;
            const double scoring_start = omp_get_wtime();
#pragma omp parallel for reduction(+ : chunk_nll) schedule(static) if (rows * c.vocab_size > (1 << 16))
            for (int r = 0; r < rows; ++r) {
                const float* z = logits.data() + static_cast<size_t>(r) * c.vocab_size;
                chunk_nll += log_sum_exp(z, c.vocab_size) - z[input[row0 + r + 1]];
            }
            result.scoring_ms += (omp_get_wtime() - scoring_start) * 1e3;
            // NaN/inf weights or an overflow give a non-finite NLL; a perplexity of "nan" must not pass as a result.
            KASCADE_CHECK(std::isfinite(chunk_nll),
                          "model \"{}\" produced non-finite logits in the window of text tokens [{}, {}) (do its "
                          "weights hold NaN or inf?)",
                          model.source().string(), window.begin, window.end);
            result.nll_sum += chunk_nll;
            result.n_scored += rows;
        }
        ++result.n_windows;
        if (on_window) on_window(result.n_windows, result);
    }
    result.seconds = omp_get_wtime() - start;
    return result;
}

}  // namespace kascade
