// io/tokenizer/hf_pre_tokenizer.h: the "pre_tokenizer" of a Hugging Face tokenizer.json, which cuts text into the
// words that BPE then encodes one by one.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/tokenizer/pcre2_regex.h"

namespace kascade {

/// Supported: null, Sequence, Split (String or Regex pattern, all five behaviours, invert), ByteLevel (GPT-2
/// regex, add_prefix_space), Digits, Metaspace. Other types are rejected when loading.
class HfPreTokenizer {
  public:
    /// `config` is the "pre_tokenizer" value; `where` names the file for error messages.
    HfPreTokenizer(const nlohmann::json& config, std::string_view where);
    ~HfPreTokenizer();

    /// Appends the words of `text` to `words`. `at_text_start`: `text` begins the whole input (not text after an
    /// added token), which Metaspace's prepend_scheme "first" looks at.
    void split(std::string_view text, bool at_text_start, std::vector<std::string>& words) const;

    bool has_byte_level() const { return has_byte_level_; }
    bool has_metaspace() const { return has_metaspace_; }

  private:
    enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
    struct Step {
        enum class Kind { kSplit, kPrefixSpace, kMetaspace } kind;
        std::unique_ptr<Pcre2Regex> regex = nullptr;  ///< kSplit; kMetaspace when it splits
        Behavior behavior = Behavior::kIsolated;
        bool invert = false;
        std::string replacement = {};  ///< kMetaspace: what a space becomes
        bool prepend_always = false;   ///< kMetaspace: prepend `replacement` to every word...
        bool prepend_first = false;    ///< ... or only to the start of the text
    };
    void add_steps(const nlohmann::json& config, std::string_view where, const std::string& field);
    static void apply(const Step& step, std::string&& word, bool at_text_start, std::vector<std::string>& out);

    std::vector<Step> steps_;
    bool has_byte_level_ = false;
    bool has_metaspace_ = false;
};

}  // namespace kascade
