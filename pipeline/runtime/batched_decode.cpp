// pipeline/runtime/batched_decode.cpp
#include "pipeline/runtime/batched_decode.h"

#include <omp.h>

#include <algorithm>

#include "base/error.h"

namespace kascade {

std::vector<DecodeTally> decode_batched(const Transformer& model, std::span<const DecodingSequence> sequences,
                                        const std::function<std::optional<int32_t>(size_t)>& next_token) {
    const size_t vocab = static_cast<size_t>(model.config().vocab_size);
    const size_t n = sequences.size();
    std::vector<DecodeTally> tallies(n);
    std::vector<int32_t> next(n);
    std::vector<bool> ended(n, false);
    std::vector<float> hidden(n * static_cast<size_t>(model.config().dim));
    std::vector<float> logits;
    std::vector<ForwardSequence> step;
    std::vector<size_t> stepping;
    while (true) {
        step.clear();
        stepping.clear();
        for (size_t i = 0; i < n; ++i) {
            if (ended[i]) continue;
            const std::optional<int32_t> token = next_token(i);
            if (!token) {
                ended[i] = true;
                continue;
            }
            const DecodingSequence& s = sequences[i];
            KASCADE_ASSERT(s.cache != nullptr && s.policy != nullptr && s.logits != nullptr);
            next[i] = *token;
            step.push_back({std::span<const int32_t>(&next[i], 1), s.cache, s.policy});
            stepping.push_back(i);
        }
        if (step.empty()) break;
        const double t0 = omp_get_wtime();
        model.forward(step, hidden.data());
        logits.resize(step.size() * vocab);
        model.lm_head(hidden.data(), static_cast<int>(step.size()), logits.data());
        const double seconds = omp_get_wtime() - t0;
        for (size_t j = 0; j < stepping.size(); ++j) {
            std::copy_n(logits.data() + j * vocab, vocab, sequences[stepping[j]].logits);
            ++tallies[stepping[j]].steps;
            tallies[stepping[j]].seconds += seconds;
        }
    }
    return tallies;
}

}  // namespace kascade
