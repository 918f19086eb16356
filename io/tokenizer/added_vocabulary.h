// io/tokenizer/added_vocabulary.h: the "added_tokens" of a Hugging Face tokenizer.json, which are found in the raw
// text before anything else and are never split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

class AddedVocabulary {
  public:
    struct Segment {
        std::string_view text;  ///< the text of an added token, or plain text between them
        int32_t id;             ///< the added token's id, or -1 for plain text
    };

    /// `lstrip` / `rstrip`: the token also swallows the whitespace before / after it.
    void add(std::string content, int32_t id, bool lstrip, bool rstrip);
    bool empty() const { return tokens_.empty(); }

    /// Cuts `text` into added tokens and the plain text between them, taking at each position the longest added
    /// token that starts there (Hugging Face's leftmost-longest match). Segments view `text`.
    std::vector<Segment> split(std::string_view text) const;

  private:
    struct Token {
        std::string content;
        int32_t id;
        bool lstrip;
        bool rstrip;
    };
    std::vector<Token> tokens_;
    /// Per first byte, the indices into tokens_ of the tokens that start with it, longest first.
    std::vector<std::vector<std::size_t>> by_first_byte_ = std::vector<std::vector<std::size_t>>(256);
};

}  // namespace kascade
