// io/tokenizer/tiktoken_tokenizer.h: Meta's Llama 3 tokenizer.model, a tiktoken rank file, tokenized as Meta's
// llama3 tokenizer.py does with the tiktoken library.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/tokenizer/added_vocabulary.h"
#include "io/tokenizer/bpe_merge.h"
#include "io/tokenizer/pcre2_regex.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {

/// A rank file is one "<base64 token bytes> <rank>" per line, ranks 0, 1, 2, ... in line order (Meta's file has
/// 128,000). It holds neither a split pattern nor special tokens: those are the model family's, and every rank file
/// is read as Llama 3's. Encoding is tiktoken's: the special tokens are cut out of the text first (they are
/// recognised in text, as the Hugging Face tokenizer.json of Llama 3 and tiktoken's encode(allowed_special="all")
/// do; Meta's tokenizer.py leaves them as plain text unless allowed), the rest is split by kLlama3SplitPattern, a
/// piece that is a token as a whole becomes that token, and any other piece is byte-level BPE: starting from its
/// single bytes, the adjacent pair whose concatenated bytes have the lowest rank is merged first (leftmost on ties).
/// Meta's tokenizer.py also cuts texts every 400,000 characters and runs of more than 25,000 spaces or non-spaces
/// before encoding (to protect tiktoken's stack); kascade, like tiktoken and Hugging Face, does not, so ids can
/// differ from Meta's at those cuts only.
class TiktokenTokenizer final : public Tokenizer {
  public:
    /// The split pattern of Meta's llama3 tokenizer.py (also tiktoken's cl100k_base).
    static constexpr std::string_view kLlama3SplitPattern =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    static constexpr int kLlama3SpecialTokens = 256;  ///< ids n .. n + 255 after the n ranks

    /// The special tokens in id order as Meta's llama3 tokenizer.py lays them out: <|begin_of_text|>,
    /// <|end_of_text|>, <|reserved_special_token_0..3|>, <|start_header_id|>, <|end_header_id|>,
    /// <|reserved_special_token_4|>, <|eot_id|>, <|reserved_special_token_5..250|>.
    static std::vector<std::string> llama3_special_tokens();

    /// Parses the text of a rank file; `path` names it in errors and locates tokenizer_config.json beside it. That
    /// file, if present, supplies the special tokens (its added_tokens_decoder, which must hold exactly ids n .. n +
    /// 255 and agree with Meta's layout on the tokens every Llama 3.x release keeps at the same id; Llama 3.1 renamed
    /// some reserved ones), bos_token / eos_token (the Instruct models' EOS is <|eot_id|>) and add_bos_token /
    /// add_eos_token. Without it BOS is <|begin_of_text|> and EOS <|end_of_text|>.
    TiktokenTokenizer(const std::filesystem::path& path, std::string_view text);
    ~TiktokenTokenizer() override;

    std::vector<int32_t> encode(std::string_view text) const override;
    /// The token's bytes (a special token's text for a special token); byte-level, so no space is dropped.
    std::string decode_piece(int32_t prev, int32_t id) const override;

    int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
    int bos_id() const override { return bos_id_; }
    int eos_id() const override { return eos_id_; }
    std::optional<bool> adds_bos_token() const override { return adds_bos_token_; }
    std::optional<bool> adds_eos_token() const override { return adds_eos_token_; }
    std::filesystem::path config_file() const override { return config_file_; }
    std::string_view kind() const override { return "tiktoken-llama3"; }

    /// The id of a token's bytes or a special token's text, or -1.
    int32_t token_id(std::string_view bytes) const;
    int n_ranks() const { return n_ranks_; }

  private:
    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

    void parse_ranks(std::string_view text);
    void add_special_tokens(const std::filesystem::path& path);
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

    std::string name_;  ///< the file, for error messages
    int n_ranks_ = 0;
    std::vector<std::string> token_bytes_;  ///< per id: the rank's bytes, or a special token's text
    StringMap ids_;                         ///< token bytes and special texts -> id
    std::array<int32_t, 256> byte_ids_{};   ///< each single byte's token
    BpePairTable merges_;
    AddedVocabulary specials_;
    std::unique_ptr<Pcre2Regex> split_;
    int32_t bos_id_ = -1;
    int32_t eos_id_ = -1;
    std::optional<bool> adds_bos_token_;
    std::optional<bool> adds_eos_token_;
    std::filesystem::path config_file_;
};

}  // namespace kascade
