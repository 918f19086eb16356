// pipeline/runtime/sequence_start.h: which token, if any, the model reads before a text, decided in one place for
// perplexity, capture, eval and generate.
#pragma once

#include <cstdint>

#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_config.h"

namespace kascade {

/// The token every perplexity / capture window and every generated sequence starts with, or -1 for none.
/// A tokenizer that says whether to add BOS (tokenizer_config.json's add_bos_token) decides: false gives -1, true
/// gives the tokenizer's BOS (or the model's if the tokenizer names none; an error if neither has one). Otherwise
/// (no such setting, llama2.c tokenizers, `tokenizer` null) the model's bos_token_id, -1 if it has none.
int32_t sequence_start_token(const ModelConfig& config, const Tokenizer* tokenizer);

/// The token that separates the documents of a corpus (see tokenize_corpus()): the sequence start token, as a new
/// document starts a new sequence, else the model's EOS (-1 if it has neither).
int32_t document_boundary_token(const ModelConfig& config, const Tokenizer* tokenizer);

}  // namespace kascade
