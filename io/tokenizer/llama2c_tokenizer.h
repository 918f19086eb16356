// io/tokenizer/llama2c_tokenizer.h: the tokenizer.bin format of llama2.c (Karpathy), encoded and decoded exactly
// as llama2.c's run.c does.
#pragma once

#include <array>
#include <bitset>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/tokenizer/bpe_merge.h"
#include "io/tokenizer/tokenizer.h"

namespace kascade {

/// tokenizer.bin: int32 max_token_length, then per token {float32 score, int32 length, bytes}; the vocabulary
/// size is not stored, every entry up to the end of the file is a token. Ids 0 <unk>, 1 BOS, 2 EOS and
/// 3..258 the byte-fallback pieces <0x00>..<0xFF> (run.c hard-codes these).
class Llama2cTokenizer final : public Tokenizer {
  public:
    /// Parses the bytes of a tokenizer.bin; `path` only names the file in error messages.
    Llama2cTokenizer(const std::filesystem::path& path, std::string_view bytes);

    /// run.c encode() without BOS/EOS: a dummy-prefix " " token (if `text` is non-empty), one token per UTF-8
    /// codepoint (or its bytes + 3 if the codepoint is not a token), then merges by highest score, leftmost first.
    std::vector<int32_t> encode(std::string_view text) const override;
    /// run.c decode(): the piece, without its leading space at the start (prev = -1) or after BOS, <0xXX> pieces
    /// as the raw byte; BOS and EOS give nothing (run.c's generator stops at them).
    std::string decode_piece(int32_t prev, int32_t id) const override;

    int vocab_size() const override { return static_cast<int>(pieces_.size()); }
    int bos_id() const override { return kBos; }
    int eos_id() const override { return kEos; }
    std::string_view kind() const override { return "llama2c-bin"; }

    const std::string& piece(int32_t id) const { return pieces_.at(id); }
    float score(int32_t id) const { return scores_.at(id); }
    int max_token_length() const { return max_token_length_; }

    static constexpr int32_t kBos = 1;
    static constexpr int32_t kEos = 2;
    static constexpr int32_t kByteOffset = 3;  ///< id of <0x00>

  private:
    int32_t lookup(std::string_view piece) const;
    /// bpe_merge() of `symbols`, run by run (see can_join_); equal to merging the whole sequence at once.
    std::vector<int32_t> merge_runs(const std::vector<int32_t>& symbols) const;

    int max_token_length_ = 0;
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::vector<std::string> decoded_;                   ///< per id: the text it stands for (<0xXX> -> the byte)
    std::unordered_map<std::string_view, int32_t> ids_;  ///< piece -> lowest id with it; views into pieces_
    BpePairTable merges_;
    /// can_join_[a][b]: some token's piece has byte a followed by byte b. Where the last byte of one symbol's piece
    /// and the first byte of the next one's never appear together, no merge can ever cross, so encode() merges
    /// the runs between such places (words, mostly) independently and reuses the result of a repeated run.
    std::array<std::bitset<256>, 256> can_join_{};
    std::vector<unsigned char> first_byte_;  ///< per id: first byte of its piece
    std::vector<unsigned char> last_byte_;   ///< per id: last byte of its piece
};

}  // namespace kascade
