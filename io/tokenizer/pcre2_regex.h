// io/tokenizer/pcre2_regex.h: a compiled PCRE2 pattern (UTF + Unicode properties, JIT when available), used for
// the split patterns of Hugging Face tokenizers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

class Pcre2Regex {
  public:
    struct Match {
        std::size_t begin;
        std::size_t end;
    };

    /// Compiles `pattern`; `literal` matches it as plain text. Throws kascade::Error naming `where` (the file and
    /// field the pattern came from) if it does not compile.
    Pcre2Regex(std::string_view pattern, bool literal, std::string_view where);
    ~Pcre2Regex();
    Pcre2Regex(const Pcre2Regex&) = delete;
    Pcre2Regex& operator=(const Pcre2Regex&) = delete;

    /// The non-empty, non-overlapping matches in `text`, leftmost first (empty matches are skipped, as no split
    /// can use them). Safe to call from several threads at once.
    std::vector<Match> find_all(std::string_view text) const;

  private:
    struct Code;
    std::unique_ptr<Code> code_;
};

}  // namespace kascade
