// io/tokenizer/gguf_tokenizer.h: the tokenizer a GGUF file embeds (tokenizer.ggml.*), encoded as llama.cpp's
// llama-vocab.cpp encodes it.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/tokenizer/added_vocabulary.h"
#include "io/tokenizer/bpe_merge.h"
#include "io/tokenizer/hf_tokenizer.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {

class GgufFile;

/// Two kinds, told by tokenizer.ggml.model:
///  - "llama" (SentencePiece vocabularies: Llama 2, Mistral, TinyLlama, llama2.c): tokens with scores and types.
///    Spaces become "▁", a "▁" is prepended to text at the start and after a special token (add_space_prefix,
///    default true), the text is cut into characters (a character with no token into its <0xXX> byte tokens) and
///    adjacent pieces merge while their concatenation is a token, highest score first, leftmost on ties.
///  - "gpt2" (byte-level BPE: Llama 3, Qwen2, SmolLM2): tokens and tokenizer.ggml.merges (ranked by position), split
///    first by the regular expressions llama.cpp uses for the tokenizer.ggml.pre name; encoded by HfTokenizer.
/// In both, tokens of type control, user-defined and unknown written in the text are that token (llama.cpp's
/// default, parse_special). BOS/EOS are tokenizer.ggml.bos_token_id / eos_token_id; add_bos_token and add_eos_token
/// default to llama.cpp's choice for the kind (BOS for "llama" and Llama 3's "llama-bpe").
class GgufTokenizer final : public Tokenizer {
  public:
    /// Reads the tokenizer.ggml.* keys of the GGUF file at `path`; errors name the file and the key.
    explicit GgufTokenizer(const std::filesystem::path& path);
    ~GgufTokenizer() override;

    std::vector<int32_t> encode(std::string_view text) const override;
    std::string decode_piece(int32_t prev, int32_t id) const override;

    int vocab_size() const override { return static_cast<int>(tokens_.size()); }
    int bos_id() const override { return bos_id_; }
    int eos_id() const override { return eos_id_; }
    std::optional<bool> adds_bos_token() const override { return add_bos_; }
    std::optional<bool> adds_eos_token() const override { return add_eos_; }
    /// "gguf-llama" or "gguf-gpt2"
    std::string_view kind() const override;

  private:
    /// llama.cpp's token types (tokenizer.ggml.token_type).
    enum class TokenType { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

    void load_sentencepiece(const GgufFile& file);
    void load_byte_level_bpe(const GgufFile& file);
    void encode_sentencepiece(std::string_view text, std::vector<int32_t>& out) const;

    std::string name_;  ///< the file, for messages
    bool byte_level_ = false;
    std::vector<std::string> tokens_;
    std::vector<TokenType> types_;
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    int32_t unk_id_ = -1;
    bool add_bos_ = false;
    bool add_eos_ = false;

    // "gpt2"
    std::unique_ptr<HfTokenizer> byte_level_bpe_;

    // "llama"
    bool add_space_prefix_ = true;
    std::unordered_map<std::string, int32_t> ids_;  ///< token text -> lowest id with it
    BpePairTable merges_;
    AddedVocabulary special_;              ///< control, user-defined and unknown tokens, found in the raw text first
    std::array<int32_t, 256> byte_ids_{};  ///< the <0xXX> token of each byte, or -1
};

}  // namespace kascade
