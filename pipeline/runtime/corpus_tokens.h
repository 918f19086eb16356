// pipeline/runtime/corpus_tokens.h: turning a text corpus into the token stream perplexity and capture read.
//
// Corpora such as TinyStories separate documents with a line "<|endoftext|>". Scoring that line as literal text
// would measure the tokenizer, not the model, so each document is stripped and encoded on its own, and documents
// are joined by the model's document boundary token: BOS where it has one (llama2.c models are trained on
// BOS-delimited stories), else EOS. Text without separator lines is encoded as it is.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "io/tokenizer/tokenizer.h"

namespace kascade {

inline constexpr std::string_view kDocumentSeparatorLine = "<|endoftext|>";

/// boundary_token: BOS or EOS of the model, -1 to keep separator lines as ordinary text.
std::vector<int32_t> tokenize_corpus(const Tokenizer& tokenizer, std::string_view text, int32_t boundary_token);

}  // namespace kascade
