// io/tokenizer/sentencepiece_tokenizer.h: a SentencePiece tokenizer.model (Llama 2, Mistral, TinyLlama, Meta's
// original downloads), encoded by Google's own library (Debian's libsentencepiece).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace kascade {

/// Encoding is libsentencepiece's Encode(), the function Meta's Llama 2 tokenizer.py and Python's sp.encode() call:
/// normalization and the dummy-prefix space as the model file says, BPE or Unigram as it says, byte fallback.
/// Control tokens such as <s> and </s> written in the text are plain text there (split into pieces, not the
/// control id), unlike the added tokens of a tokenizer.json; user-defined pieces are matched as the library does.
/// Decoding is the library's per piece: "▁" is a space, a <0xXX> piece its byte, a control token (BOS, EOS) gives
/// no text, <unk> gives the model's unk_surface (" ⁇ "), and at the start of a stream (prev = -1) or after BOS the
/// piece loses one leading space when the normalizer adds a dummy prefix or removes extra whitespace, as the
/// library and llama2.c's run.c do.
class SentencePieceTokenizer final : public Tokenizer {
  public:
    /// Parses the bytes of a tokenizer.model; `path` names the file in errors and locates a tokenizer_config.json
    /// beside it (add_bos_token, add_eos_token; BOS and EOS themselves are the model's).
    SentencePieceTokenizer(const std::filesystem::path& path, std::string_view bytes);
    ~SentencePieceTokenizer() override;

    std::vector<int32_t> encode(std::string_view text) const override;
    std::string decode_piece(int32_t prev, int32_t id) const override;

    int vocab_size() const override { return static_cast<int>(texts_.size()); }
    int bos_id() const override { return bos_id_; }
    int eos_id() const override { return eos_id_; }
    std::optional<bool> adds_bos_token() const override { return adds_bos_token_; }
    std::optional<bool> adds_eos_token() const override { return adds_eos_token_; }
    std::filesystem::path config_file() const override { return config_file_; }
    std::string_view kind() const override { return "sentencepiece-model"; }

  private:
    std::string name_;  ///< the file, for error messages
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
    std::vector<std::string> texts_;  ///< per id: the text it decodes to in the middle of a stream
    std::vector<char> drops_space_;   ///< per id: loses its leading space at the start of a stream
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    std::optional<bool> adds_bos_token_;
    std::optional<bool> adds_eos_token_;
    std::filesystem::path config_file_;
};

}  // namespace kascade
