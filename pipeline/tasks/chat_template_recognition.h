// pipeline/tasks/chat_template_recognition.h: which chat template family a model's chat_template text is, and the
// family a run uses: the one named with --chat-template, else the one recognised in the model's tokenizer_config.json.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "io/tokenizer/tokenizer_config.h"
#include "pipeline/tasks/chat_template.h"

namespace kascade {

/// The option that names a chat template family (or none), which every refusal below points to.
inline constexpr std::string_view kChatTemplateOption = "--chat-template";

/// The family whose real template `chat_template` is. A family is identified by its distinctive markers (e.g.
/// "<|im_start|>" with Qwen's default system text), then every tag its renderer transcribes must be in the text in
/// order (whitespace, quoting and whitespace control aside), so that a fine-tune's changed template is not taken
/// for the original. A template that is none of them, or looks like one but differs, is refused with an error
/// naming `source` (the file), chat_template and the --chat-template NAME|none option.
ChatTemplate recognize_chat_template(std::string_view chat_template, std::string_view source);

/// The family and special strings a run uses: the family `named` with --chat-template if given (parse it with
/// parse_mode<ChatTemplate>(value, kChatTemplateOption)), else the family of the chat template in `config`, else None
/// (no config or no chat template in it: a base model, given the prompt as is).
struct ChatTemplateChoice {
    ChatTemplate family = ChatTemplate::None;
    ChatSpecialTokens tokens;  ///< bos_token and eos_token of the config (empty without one)
};
ChatTemplateChoice choose_chat_template(std::optional<ChatTemplate> named,
                                        const std::optional<TokenizerConfig>& config);

/// choose_chat_template with the tokenizer_config.json (and the chat_template.jinja beside it) in `model_dir`, if
/// there is one.
ChatTemplateChoice choose_chat_template_for_model(std::optional<ChatTemplate> named,
                                                  const std::filesystem::path& model_dir);

}  // namespace kascade
