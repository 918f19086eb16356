// io/tokenizer/hf_normalizer.h: the "normalizer" of a Hugging Face tokenizer.json (the subset used by BPE
// tokenizers of Llama-family models).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/tokenizer/pcre2_regex.h"

namespace kascade {

/// A Split or Replace "pattern" of tokenizer.json: {"String": "..."} (literal) or {"Regex": "..."}; `field` is
/// the JSON path of the owning object, for error messages.
std::unique_ptr<Pcre2Regex> compile_hf_pattern(const nlohmann::json& pattern, std::string_view where,
                                               const std::string& field);

/// Supported: null, Sequence, Prepend, Replace (String or Regex pattern), and the Unicode normal forms NFC, NFD,
/// NFKC, NFKD (through utf8proc). Anything else (Lowercase, Strip, BertNormalizer, ...) is rejected when loading,
/// so that no text is ever tokenized differently from Hugging Face.
class HfNormalizer {
  public:
    /// `config` is the "normalizer" value; `where` names the file for error messages.
    HfNormalizer(const nlohmann::json& config, std::string_view where);
    ~HfNormalizer();

    /// The normalized text; throws kascade::Error if a Unicode normal form is asked of text that is not UTF-8.
    std::string apply(std::string_view text) const;

    /// True if the normalizer changes nothing (null, or an empty Sequence).
    bool is_identity() const { return steps_.empty(); }

    /// True if a step of this normalizer is a Prepend or a Replace whose replacement is `content`.
    bool produces(std::string_view content) const;

  private:
    struct Step {
        enum class Kind { kPrepend, kReplace, kUnicodeForm } kind;
        std::string content;  ///< what Prepend adds / what Replace puts in place of a match / the form's name
        std::unique_ptr<Pcre2Regex> regex;  ///< Replace only
        int utf8proc_options = 0;           ///< kUnicodeForm: the utf8proc_map options of the form
    };
    void add_steps(const nlohmann::json& config, std::string_view where, const std::string& field);

    std::string where_;  ///< the file, for error messages
    std::vector<Step> steps_;
};

}  // namespace kascade
