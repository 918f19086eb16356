// pipeline/tasks/dataset_prompt.h: a dataset sample's prompt text as the tokens the model reads, cut in the middle
// when it is longer than the requested length, as LongBench's pred.py cuts (head and tail kept).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "io/tokenizer/tokenizer.h"

namespace kascade {

/// The first max_tokens / 2 tokens and the last max_tokens - max_tokens / 2: exactly max_tokens of a longer
/// sequence, keeping its beginning (BOS, a chat template's header, the instruction) and its end (the question and
/// the assistant turn); a sequence of at most max_tokens is returned as is. max_tokens >= 2.
std::vector<int32_t> truncate_middle(std::span<const int32_t> tokens, int max_tokens);

struct DatasetPromptTokens {
    std::vector<int32_t> tokens;  ///< what the model reads: at most the requested length
    int64_t full_tokens = 0;      ///< before the cut
    int64_t cut_at = -1;          ///< where the cut is (tokens[cut_at] is the first token after it); -1: not cut
};

/// start_token (unless the text's own first token is it, as a chat template's "<|begin_of_text|>" is) + the text's
/// tokens, cut by truncate_middle to max_length. LongBench cuts the raw prompt before its chat template and then
/// tokenizes again, which can exceed its limit by the template's tokens; cutting the final token sequence keeps
/// exactly max_length, so every method of a comparison reads the same tokens.
DatasetPromptTokens dataset_prompt_tokens(std::string_view text, const Tokenizer& tokenizer, int32_t start_token,
                                          int max_length);

}  // namespace kascade
