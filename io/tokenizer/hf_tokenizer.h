// io/tokenizer/hf_tokenizer.h: Hugging Face tokenizer.json with a BPE model, in its two Llama-family forms:
// byte-level BPE (GPT-2, SmolLM2, Llama 3, Qwen) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral).
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/tokenizer/added_vocabulary.h"
#include "io/tokenizer/bpe_merge.h"
#include "io/tokenizer/hf_normalizer.h"
#include "io/tokenizer/hf_pre_tokenizer.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {

/// Encoding follows Hugging Face tokenizers: added tokens that are not "normalized" are cut out of the raw text
/// first (leftmost-longest); every other segment goes through the normalizer, the "normalized" added tokens (as
/// the normalizer writes them) are cut out of the result, and the rest goes through the pre-tokenizer and each word
/// through BPE (merges lowest rank first, leftmost on ties). The family is told from the JSON: a ByteLevel
/// pre-tokenizer or decoder means byte-level; a Metaspace pre-tokenizer or decoder, a "▁" normalizer, or a ByteFallback
/// decoder means SentencePiece-style. Decoding follows the family's standard decoder (ByteLevel; or Replace "▁" -> " ",
/// ByteFallback, Fuse and Strip of one leading space), added tokens giving their content.
class HfTokenizer final : public Tokenizer {
  public:
    /// Parses the text of a tokenizer.json; `path` names the file in errors and locates tokenizer_config.json
    /// beside it (bos_token, eos_token, add_bos_token, add_eos_token; other fields are not read).
    HfTokenizer(const std::filesystem::path& path, std::string_view json_text);
    /// A tokenizer.json that another container's vocabulary was turned into (a GGUF file's tokenizer.ggml.* keys):
    /// `name` names the source in errors, BOS and EOS are the ids given (-1: none), no tokenizer_config.json is read.
    HfTokenizer(std::string name, const nlohmann::json& root, int32_t bos_id, int32_t eos_id);
    ~HfTokenizer() override;

    std::vector<int32_t> encode(std::string_view text) const override;
    /// The token's bytes; SentencePiece-style tokens at the start (prev = -1) or after BOS lose one leading space.
    std::string decode_piece(int32_t prev, int32_t id) const override;

    int vocab_size() const override { return static_cast<int>(token_text_.size()); }
    /// From tokenizer_config.json beside the file if it names them, else the added token <s> / <|begin_of_text|>
    /// (BOS) and </s> / <|end_of_text|> / <|endoftext|> (EOS) if present.
    int bos_id() const override { return bos_id_; }
    int eos_id() const override { return eos_id_; }
    std::optional<bool> adds_bos_token() const override { return adds_bos_token_; }
    std::optional<bool> adds_eos_token() const override { return adds_eos_token_; }
    std::filesystem::path config_file() const override { return config_file_; }
    std::string_view kind() const override;

    /// The id of a vocabulary or added token string (as stored in the JSON), or -1.
    int32_t token_id(std::string_view token) const;

  private:
    enum class Family { kByteLevel, kSentencePiece };

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

    void load(const nlohmann::json& root);
    /// The two tokens of a merge written as "left right" (the older format); `rank` is its index, for errors.
    std::pair<std::string, std::string> split_merge_line(std::string_view line, std::size_t rank) const;
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;
    void read_tokenizer_config(const std::filesystem::path& tokenizer_path);

    std::string name_;  ///< the file, for error messages
    Family family_ = Family::kByteLevel;
    StringMap vocab_;                      ///< model.vocab and added tokens
    std::vector<std::string> token_text_;  ///< per id: the bytes it decodes to
    BpePairTable merges_;
    AddedVocabulary raw_added_;         ///< added tokens looked for in the raw text
    AddedVocabulary normalized_added_;  ///< "normalized" added tokens, looked for in each normalized segment
    std::unique_ptr<HfNormalizer> normalizer_;
    std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
    std::array<int32_t, 256> byte_ids_{};  ///< byte-level: each byte's token; SentencePiece: <0xXX> or -1
    int32_t unk_id_ = -1;
    bool byte_fallback_ = false;
    bool fuse_unk_ = false;
    bool ignore_merges_ = false;
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    std::optional<bool> adds_bos_token_;
    std::optional<bool> adds_eos_token_;
    std::filesystem::path config_file_;
};

}  // namespace kascade
