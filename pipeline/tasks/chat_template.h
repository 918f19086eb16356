// pipeline/tasks/chat_template.h: the chat templates of the supported instruct models, written in C++ (no Jinja
// engine): the families with their one string mapping, and the rendering of a conversation into the prompt text
// that the model is given, as the family's real chat_template renders it under transformers.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"

namespace kascade {

/// A chat template family: each value renders exactly as one real chat_template does for conversations of system,
/// user and assistant turns (tests/fixtures/chat-templates holds the real texts; no tools or images; Qwen3's
/// enable_thinking switch as a family of its own).
enum class ChatTemplate {
    None,     ///< no template: the messages' contents concatenated, nothing added (no roles, no BOS)
    Llama3,   ///< Meta-Llama-3-Instruct: <|start_header_id|>role<|end_header_id|>, trimmed content, <|eot_id|>
    Llama31,  ///< Llama 3.1 / 3.2 Instruct: Llama 3 plus a system header that always holds the knowledge and today's
              ///< dates (today pinned to the template's own default, kLlama31DateString)
    ChatML,   ///< plain ChatML: <|im_start|>role\ncontent<|im_end|>\n (OpenHermes, transformers' old default)
    Qwen25,   ///< Qwen2.5-Instruct: ChatML with Qwen's default system turn when there is none
    Qwen3,  ///< Qwen3: ChatML; assistant turns after the last user turn keep their <think> block, earlier ones lose it
    Qwen3NoThinking,  ///< Qwen3's template rendered with enable_thinking=false: the generation prompt ends in an empty
                      ///< <think> block, which tells Qwen3 to answer without reasoning first (a task's answer is
                      ///< then the first tokens generated). Never recognised: it is the same template text as Qwen3
    SmolLM2,          ///< SmolLM2-Instruct: ChatML with SmolLM's default system turn when there is none
    Mistral,          ///< Mistral-7B-Instruct-v0.1: BOS, [INST] user [/INST]assistant</s> ; no system turn
    Llama2,           ///< Llama-2-chat: <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant </s>
    Zephyr,           ///< Zephyr / TinyLlama-1.1B-Chat-v1.0: <|role|>\ncontent</s>\n
    Phi3,             ///< Phi-3-mini-instruct: <|role|>\ncontent<|end|>\n, EOS at the end without a generation prompt
};
template <>
struct EnumNameTable<ChatTemplate> {
    static constexpr EnumNames<ChatTemplate, 12> names{{{ChatTemplate::None, "none"},
                                                        {ChatTemplate::Llama3, "llama3"},
                                                        {ChatTemplate::Llama31, "llama3.1"},
                                                        {ChatTemplate::ChatML, "chatml"},
                                                        {ChatTemplate::Qwen25, "qwen2.5"},
                                                        {ChatTemplate::Qwen3, "qwen3"},
                                                        {ChatTemplate::Qwen3NoThinking, "qwen3-no-thinking"},
                                                        {ChatTemplate::SmolLM2, "smollm2"},
                                                        {ChatTemplate::Mistral, "mistral"},
                                                        {ChatTemplate::Llama2, "llama2"},
                                                        {ChatTemplate::Zephyr, "zephyr"},
                                                        {ChatTemplate::Phi3, "phi3"}}};
};

enum class ChatRole { System, User, Assistant };
template <>
struct EnumNameTable<ChatRole> {
    static constexpr EnumNames<ChatRole, 3> names{
        {{ChatRole::System, "system"}, {ChatRole::User, "user"}, {ChatRole::Assistant, "assistant"}}};
};

struct ChatMessage {
    ChatRole role;
    std::string content;  ///< UTF-8 text
};

/// The special strings a template writes, from the model's tokenizer_config.json (bos_token, eos_token).
struct ChatSpecialTokens {
    std::string bos;
    std::string eos;
};

/// The date Llama 3.1 / 3.2 templates write as "Today Date" when the caller gives none ("26 Jul 2024": the 3.1
/// template's default; 3.2's would take the day of the run, which would make a prompt, and every score stored
/// under it, depend on when it ran).
inline constexpr std::string_view kLlama31DateString = "26 Jul 2024";

/// The prompt text `family` renders for `messages`, with the assistant header after them if
/// `add_generation_prompt` (templates that have none, Mistral's and Llama 2's, ignore it). Conversations a real
/// template refuses (Mistral: a system turn or roles not alternating user/assistant; Llama 2: likewise after its
/// optional first system turn) or would silently drop a turn of (Llama 2: a later system turn) are refused with
/// an error naming the message, as is an empty conversation.
std::string render_chat(ChatTemplate family, const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages,
                        bool add_generation_prompt);

/// Whether `family`'s rendering begins with the BOS string itself (Llama 3, Llama 3.1, Mistral, Llama 2), so that a
/// caller tokenising it must not add a BOS id of its own (the template's BOS text becomes that id).
bool chat_template_writes_bos(ChatTemplate family);

}  // namespace kascade
