// io/tokenizer/tokenizer_config.h: the tokenizer_config.json that Hugging Face keeps beside a tokenizer file. It
// names BOS and EOS, says whether they are added to every sequence, lists the added (special) tokens and holds the
// chat template of an instruct model; every tokenizer kind that can sit in a Hugging Face folder (tokenizer.json,
// tokenizer.model) reads it the same way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kascade {

struct TokenizerConfig {
    std::filesystem::path path;         ///< the tokenizer_config.json read, for error messages
    std::string bos_token;              ///< bos_token (a string or an object's "content"); empty if absent or null
    std::string eos_token;              ///< eos_token, likewise
    std::optional<bool> add_bos_token;  ///< nullopt if absent or null (what transformers writes for "not set")
    std::optional<bool> add_eos_token;
    /// added_tokens_decoder as (id, content), by increasing id; empty if absent or not asked for.
    std::vector<std::pair<int32_t, std::string>> added_tokens;
    /// The chat template (a Jinja text), if asked for: chat_template (a string, or the entry named "default" of a
    /// list of {name, template}), else the chat_template.jinja beside the file, as transformers reads them; nullopt
    /// if there is none.
    std::optional<std::string> chat_template;
    std::filesystem::path chat_template_path;  ///< the file chat_template came from, for error messages
};

/// The tokenizer_config.json in the folder of `tokenizer_path`, or nullopt if there is none. Other fields
/// (model_max_length, ...) and the chat template are not read. `with_added_tokens` also reads added_tokens_decoder,
/// which only tokenizer files without their own list of special tokens need (a tiktoken rank file). Throws
/// kascade::Error naming the file and the field if it is not valid JSON, not an object or a read field has the wrong
/// type.
std::optional<TokenizerConfig> read_tokenizer_config(const std::filesystem::path& tokenizer_path,
                                                     bool with_added_tokens = false);

/// The tokenizer_config.json at `config_path` itself (a file the user named: a missing one is an error), with its
/// chat template if `with_chat_template`; a chat_template that is neither a string nor a list of {name, template}
/// with a "default" entry is refused naming the file.
TokenizerConfig read_tokenizer_config_file(const std::filesystem::path& config_path, bool with_added_tokens,
                                           bool with_chat_template);

}  // namespace kascade
