// pipeline/tasks/dataset_prompt.cpp: prompt text -> tokens with LongBench's middle truncation.
#include "pipeline/tasks/dataset_prompt.h"

#include "base/error.h"

namespace kascade {

std::vector<int32_t> truncate_middle(std::span<const int32_t> tokens, int max_tokens) {
    KASCADE_ASSERT(max_tokens >= 2);
    const std::size_t limit = static_cast<std::size_t>(max_tokens);
    if (tokens.size() <= limit) return {tokens.begin(), tokens.end()};
    const std::size_t head = limit / 2;
    const std::size_t tail = limit - head;
    std::vector<int32_t> out(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(head));
    out.insert(out.end(), tokens.end() - static_cast<std::ptrdiff_t>(tail), tokens.end());
    return out;
}

DatasetPromptTokens dataset_prompt_tokens(std::string_view text, const Tokenizer& tokenizer, int32_t start_token,
                                          int max_length) {
    std::vector<int32_t> tokens = tokenizer.encode(text);
    if (start_token >= 0 && (tokens.empty() || tokens.front() != start_token))
        tokens.insert(tokens.begin(), start_token);
    DatasetPromptTokens out;
    out.full_tokens = static_cast<int64_t>(tokens.size());
    if (out.full_tokens > max_length) out.cut_at = max_length / 2;
    out.tokens = truncate_middle(tokens, max_length);
    return out;
}

}  // namespace kascade
