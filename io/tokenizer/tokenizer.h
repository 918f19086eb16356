// io/tokenizer/tokenizer.h: text <-> token ids, for every tokenizer format kascade reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

class Tokenizer {
  public:
    virtual ~Tokenizer() = default;

    /// Token ids of `text`, without BOS/EOS (callers add them where the model expects them).
    virtual std::vector<int32_t> encode(std::string_view text) const = 0;

    /// The text of `ids`: decode_piece() concatenated over them. decode(encode(s)) == s for every valid UTF-8 s.
    std::string decode(std::span<const int32_t> ids) const;

    /// The bytes token `id` contributes when it follows `prev` in a stream (prev = -1 at the start): what a
    /// generator prints token by token. Concatenating it over a sequence (prev = -1 first) gives decode() of that
    /// sequence. SentencePiece-style tokenizers (llama2.c, Llama 2) drop the leading space of the first piece and
    /// of the first piece after BOS, as llama2.c's run.c and the Hugging Face decoder do; a llama2.c BOS or EOS
    /// gives no text. Throws kascade::Error if `id` is not in the vocabulary.
    virtual std::string decode_piece(int32_t prev, int32_t id) const = 0;

    virtual int vocab_size() const = 0;
    virtual int bos_id() const = 0;  ///< -1 if none
    virtual int eos_id() const = 0;  ///< -1 if none

    /// Whether the model expects BOS before / EOS after an encoded text, where the tokenizer's files say so: a
    /// Hugging Face tokenizer_config.json's add_bos_token / add_eos_token. nullopt if nothing says (no such file
    /// or field, or a llama2.c tokenizer): callers then follow the model's config (see sequence_start_token()).
    virtual std::optional<bool> adds_bos_token() const { return std::nullopt; }
    virtual std::optional<bool> adds_eos_token() const { return std::nullopt; }

    /// The tokenizer_config.json read beside the tokenizer file, empty if none was: it is part of what the tokenizer
    /// is (BOS, and for a tiktoken file EOS and the special tokens), so content hashes must cover it too.
    virtual std::filesystem::path config_file() const { return {}; }

    /// "llama2c-bin", "hf-bpe-bytelevel", "hf-bpe-sentencepiece", "tiktoken-llama3" (a rank file read as Llama 3's
    /// tokenizer.model), "sentencepiece-model" (a SentencePiece tokenizer.model), "gguf-llama" / "gguf-gpt2" (the
    /// tokenizer a GGUF model file embeds)
    virtual std::string_view kind() const = 0;
};

/// Loads a llama2.c tokenizer.bin, a Hugging Face tokenizer.json, a tokenizer.model (a tiktoken rank file, as Meta
/// ships for Llama 3, or a SentencePiece model, as for Llama 2 and Mistral) or the tokenizer embedded in a GGUF model
/// file, chosen by content, not by name.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& path);

/// The tokenizer that sits next to a model: for a directory, tokenizer.json, then tokenizer.model, then any
/// tokenizer*.bin / tok*.bin in it; for a .gguf file, the file itself (it embeds one); for another file, the same
/// names in its folder. Returns an empty path if there is none.
std::filesystem::path find_tokenizer_for_model(const std::filesystem::path& model_path);

}  // namespace kascade
