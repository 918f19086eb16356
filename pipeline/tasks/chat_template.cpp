// pipeline/tasks/chat_template.cpp: one renderer per chat template family, each a transcription of what the
// family's real chat_template (tests/fixtures/chat-templates) renders for system, user and assistant turns under
// transformers (Jinja2 with trim_blocks and lstrip_blocks: Python's string methods).
#include "pipeline/tasks/chat_template.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "pipeline/tasks/python_text.h"

namespace kascade {

namespace {

// The default system turns the ChatML variants write when a conversation has none (their templates' text).
constexpr std::string_view kQwen25DefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr std::string_view kSmolLM2DefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// The code point that starts at `s[i]` and its length in bytes (the text is valid UTF-8: it came through a JSON
/// parser that checks it; a stray byte is taken as itself, which no whitespace test matches).
std::pair<char32_t, size_t> code_point_at(std::string_view s, size_t i) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    if (i + length > s.size()) return {b, 1};
    char32_t c = length == 1 ? b : b & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    return {c, length};
}

/// Python's s.strip(): without whitespace at either end.
std::string python_strip(std::string_view s) {
    size_t begin = 0;
    while (begin < s.size()) {
        const auto [c, length] = code_point_at(s, begin);
        if (!is_python_space(c)) break;
        begin += length;
    }
    size_t end = begin;  // one past the last code point that is not whitespace
    for (size_t i = begin; i < s.size();) {
        const auto [c, length] = code_point_at(s, i);
        i += length;
        if (!is_python_space(c)) end = i;
    }
    return std::string(s.substr(begin, end - begin));
}

std::string_view lstrip_newlines(std::string_view s) {
    return s.substr(std::min(s.find_first_not_of('\n'), s.size()));
}
std::string_view rstrip_newlines(std::string_view s) {
    const size_t last = s.find_last_not_of('\n');
    return last == std::string_view::npos ? std::string_view() : s.substr(0, last + 1);
}

std::string role_text(ChatRole role) {
    return std::string(mode_name(role));
}

[[noreturn]] void refuse(ChatTemplate family, size_t index, const ChatMessage& message, std::string_view why) {
    KASCADE_FAIL("chat template '{}': messages[{}] (role {}): {}", mode_name(family), index, mode_name(message.role),
                 why);
}

// --- Llama 3 family ---------------------------------------------------------------------------------------------

std::string llama3_turn(const ChatMessage& m) {
    return "<|start_header_id|>" + role_text(m.role) + "<|end_header_id|>\n\n" + python_strip(m.content) + "<|eot_id|>";
}
constexpr std::string_view kLlama3AssistantHeader = "<|start_header_id|>assistant<|end_header_id|>\n\n";

std::string render_llama3(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages, bool generation) {
    std::string out = tokens.bos;
    for (const ChatMessage& m : messages) out += llama3_turn(m);
    if (generation) out += kLlama3AssistantHeader;
    return out;
}

std::string render_llama31(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages, bool generation) {
    // The first turn, if a system one, goes inside the system header the template always writes.
    const bool has_system = messages.front().role == ChatRole::System;
    std::string out = tokens.bos +
                      "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
                      "2023\nToday Date: " +
                      std::string(kLlama31DateString) + "\n\n" +
                      (has_system ? python_strip(messages.front().content) : std::string()) + "<|eot_id|>";
    for (const ChatMessage& m : messages.subspan(has_system ? 1 : 0)) out += llama3_turn(m);
    if (generation) out += kLlama3AssistantHeader;
    return out;
}

// --- ChatML family ----------------------------------------------------------------------------------------------

std::string chatml_turn(std::string_view role, std::string_view content) {
    return "<|im_start|>" + std::string(role) + "\n" + std::string(content) + "<|im_end|>\n";
}
constexpr std::string_view kChatMLAssistantHeader = "<|im_start|>assistant\n";

/// Plain ChatML, after a default system turn if the conversation does not start with one and there is a default.
std::string render_chatml(std::string_view default_system, std::span<const ChatMessage> messages, bool generation) {
    std::string out;
    if (!default_system.empty() && messages.front().role != ChatRole::System) {
        out += chatml_turn("system", default_system);
    }
    for (const ChatMessage& m : messages) out += chatml_turn(role_text(m.role), m.content);
    if (generation) out += kChatMLAssistantHeader;
    return out;
}

/// Qwen3: ChatML, where an assistant turn after the last user turn shows its reasoning in a <think> block (the
/// last one always, an empty block if it has none) and an earlier one shows only its answer.
/// With `thinking` false (enable_thinking=false) the generation prompt is followed by an empty <think> block; with it
/// true the variable is left undefined, as transformers leaves it when the caller does not pass it.
std::string render_qwen3(std::span<const ChatMessage> messages, bool generation, bool thinking) {
    // The last user turn that is not a tool response wrapped in <tool_response> tags; else the last turn.
    size_t last_query = messages.size() - 1;
    for (size_t i = messages.size(); i-- > 0;) {
        const std::string_view c = messages[i].content;
        if (messages[i].role == ChatRole::User &&
            !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    std::string out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role != ChatRole::Assistant) {
            out += chatml_turn(role_text(m.role), m.content);
            continue;
        }
        // A </think> in the content splits it into reasoning and answer.
        std::string_view content = m.content;
        std::string_view reasoning;
        if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
            reasoning = rstrip_newlines(content.substr(0, close));
            if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) {
                reasoning = reasoning.substr(open + std::string_view("<think>").size());
            }
            reasoning = lstrip_newlines(reasoning);
            content = lstrip_newlines(content.substr(content.rfind("</think>") + std::string_view("</think>").size()));
        }
        out += "<|im_start|>assistant\n";
        const bool last = i + 1 == messages.size();
        if (i > last_query && (last || !reasoning.empty())) {
            out += "<think>\n" + std::string(rstrip_newlines(lstrip_newlines(reasoning))) + "\n</think>\n\n" +
                   std::string(lstrip_newlines(content));
        } else {
            out += content;
        }
        out += "<|im_end|>\n";
    }
    if (generation) {
        out += kChatMLAssistantHeader;
        if (!thinking) out += "<think>\n\n</think>\n\n";
    }
    return out;
}

// --- [INST] family ----------------------------------------------------------------------------------------------

/// Mistral-7B-Instruct-v0.1: user and assistant turns only, alternating from a user turn.
std::string render_mistral(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages) {
    std::string out = tokens.bos;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const ChatRole expected = i % 2 == 0 ? ChatRole::User : ChatRole::Assistant;
        if (m.role != expected) {
            refuse(
                ChatTemplate::Mistral, i, m,
                fmt::format("expected {}: Mistral's template takes only user and assistant turns, alternating from a "
                            "user turn (it raises an exception otherwise; put a system text into the first user "
                            "turn)",
                            mode_name(expected)));
        }
        out += m.role == ChatRole::User ? "[INST] " + m.content + " [/INST]" : m.content + tokens.eos + " ";
    }
    return out;
}

/// Llama-2-chat: an optional first system turn folded into the first user turn, then user and assistant turns
/// alternating from a user turn.
std::string render_llama2(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages) {
    const bool has_system = messages.front().role == ChatRole::System;
    const size_t first = has_system ? 1 : 0;
    if (first == messages.size()) {
        refuse(ChatTemplate::Llama2, 0, messages.front(),
               "a system turn needs a user turn after it (Llama 2's template writes it into the first user turn and "
               "would drop it)");
    }
    std::string out;
    for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const ChatRole expected = (i - first) % 2 == 0 ? ChatRole::User : ChatRole::Assistant;
        if (m.role != expected) {
            refuse(ChatTemplate::Llama2, i, m,
                   fmt::format("expected {}: after an optional first system turn Llama 2's template takes user and "
                               "assistant turns alternating from a user turn (it raises an exception otherwise, or "
                               "drops a later system turn)",
                               mode_name(expected)));
        }
        std::string content = m.content;
        if (i == first && has_system) content = "<<SYS>>\n" + messages.front().content + "\n<</SYS>>\n\n" + content;
        if (m.role == ChatRole::User)
            out += fmt::format("{}[INST] {} [/INST]", tokens.bos, python_strip(content));
        else
            out += fmt::format(" {} {}", python_strip(content), tokens.eos);
    }
    return out;
}

// --- <|role|> family --------------------------------------------------------------------------------------------

std::string render_zephyr(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages, bool generation) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|" + role_text(m.role) + "|>\n" + m.content + tokens.eos + "\n";
    if (generation) out += "<|assistant|>\n";
    return out;
}

std::string render_phi3(const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages, bool generation) {
    std::string out;
    for (const ChatMessage& m : messages) out += "<|" + role_text(m.role) + "|>\n" + m.content + "<|end|>\n";
    out += generation ? std::string("<|assistant|>\n") : tokens.eos;
    return out;
}

}  // namespace
std::string render_chat(ChatTemplate family, const ChatSpecialTokens& tokens, std::span<const ChatMessage> messages,
                        bool add_generation_prompt) {
    KASCADE_CHECK(!messages.empty(), "chat template '{}': the conversation has no messages (expected at least one)",
                  mode_name(family));
    switch (family) {
        case ChatTemplate::None: {
            std::string out;
            for (const ChatMessage& m : messages) out += m.content;
            return out;
        }
        case ChatTemplate::Llama3:
            return render_llama3(tokens, messages, add_generation_prompt);
        case ChatTemplate::Llama31:
            return render_llama31(tokens, messages, add_generation_prompt);
        case ChatTemplate::ChatML:
            return render_chatml("", messages, add_generation_prompt);
        case ChatTemplate::Qwen25:
            return render_chatml(kQwen25DefaultSystem, messages, add_generation_prompt);
        case ChatTemplate::Qwen3:
            return render_qwen3(messages, add_generation_prompt, /*thinking=*/true);
        case ChatTemplate::Qwen3NoThinking:
            return render_qwen3(messages, add_generation_prompt, /*thinking=*/false);
        case ChatTemplate::SmolLM2:
            return render_chatml(kSmolLM2DefaultSystem, messages, add_generation_prompt);
        case ChatTemplate::Mistral:
            return render_mistral(tokens, messages);
        case ChatTemplate::Llama2:
            return render_llama2(tokens, messages);
        case ChatTemplate::Zephyr:
            return render_zephyr(tokens, messages, add_generation_prompt);
        case ChatTemplate::Phi3:
            return render_phi3(tokens, messages, add_generation_prompt);
    }
    KASCADE_ASSERT(false && "chat template without a renderer");
    return {};
}

bool chat_template_writes_bos(ChatTemplate family) {
    switch (family) {
        case ChatTemplate::Llama3:
        case ChatTemplate::Llama31:
        case ChatTemplate::Mistral:
        case ChatTemplate::Llama2:
            return true;
        default:
            return false;
    }
}

}  // namespace kascade
