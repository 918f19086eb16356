// pipeline/tasks/chat_template_recognition.cpp: recognising a chat template family in a chat_template text by its
// markers and the tags its renderer transcribes, compared in a canonical form of the Jinja text.
#include "pipeline/tasks/chat_template_recognition.h"

#include <algorithm>
#include <span>
#include <vector>

#include <fmt/ranges.h>

#include "base/error.h"

namespace kascade {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/// Removes what transformers' Jinja environment (trim_blocks, lstrip_blocks) removes before rendering: one final
/// newline, the blanks before a block or comment tag that starts a line, the newline after one.
std::string apply_block_trimming(std::string_view text) {
    if (text.ends_with('\n')) text.remove_suffix(1);
    std::string out;
    out.reserve(text.size());
    size_t line_start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (i == line_start) {  // lstrip_blocks: drop blanks before "{%" or "{#" at the start of a line
            size_t j = i;
            while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
            if (j + 1 < text.size() && text[j] == '{' && (text[j + 1] == '%' || text[j + 1] == '#')) i = j;
        }
        out += text[i];
        if (text[i] == '\n') line_start = i + 1;
        // trim_blocks: the newline after "%}" or "#}"
        if (i + 1 < text.size() && text[i] == '}' && i > 0 && (text[i - 1] == '%' || text[i - 1] == '#') &&
            text[i + 1] == '\n') {
            ++i;
            line_start = i + 1;
        }
    }
    return out;
}

/// A canonical form of a Jinja template for comparing templates that differ only in how they are written: the text
/// outside tags as it renders (after block trimming and whitespace control), comments dropped, and inside each
/// "{{ }}" or "{% %}" the blanks removed and string literals unescaped into double quotes. `'a\n' + x` and
/// `"a<newline>"+x` become the same. Never fails: an unterminated tag or literal ends the text.
std::string canonical_template(std::string_view template_text) {
    const std::string text = apply_block_trimming(template_text);
    std::string out;
    bool strip_next_raw = false;  // a "-" before the last tag's end: the blanks after it are dropped
    size_t i = 0;
    while (i < text.size()) {
        const size_t open = text.find('{', i);
        const bool is_tag = open != std::string::npos && open + 1 < text.size() &&
                            (text[open + 1] == '{' || text[open + 1] == '%' || text[open + 1] == '#');
        if (!is_tag) {  // raw text up to the next '{' (or the end), which is not a tag's start
            const size_t end = open == std::string::npos ? text.size() : open + 1;
            std::string_view raw = std::string_view(text).substr(i, end - i);
            if (strip_next_raw) {
                while (!raw.empty() && is_space(raw.front())) raw.remove_prefix(1);
                strip_next_raw = raw.empty();
            }
            out += raw;
            i = end;
            continue;
        }
        std::string_view raw = std::string_view(text).substr(i, open - i);
        if (strip_next_raw)
            while (!raw.empty() && is_space(raw.front())) raw.remove_prefix(1);
        const char kind = text[open + 1];
        size_t pos = open + 2;
        if (pos < text.size() && text[pos] == '-') {  // "{{-", "{%-", "{#-": the blanks before the tag are dropped
            while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
            ++pos;
        }
        out += raw;
        strip_next_raw = false;
        if (kind == '#') {
            const size_t close = text.find("#}", pos);
            if (close == std::string::npos) return out;
            strip_next_raw = close > pos && text[close - 1] == '-';
            i = close + 2;
            continue;
        }
        const char closer = kind == '{' ? '}' : '%';
        out += '{';
        out += kind;
        bool closed = false;
        while (pos < text.size() && !closed) {
            const char c = text[pos];
            if (c == '\'' || c == '"') {  // a string literal, unescaped
                out += '"';
                for (++pos; pos < text.size() && text[pos] != c; ++pos) {
                    if (text[pos] == '\\' && pos + 1 < text.size()) {
                        const char e = text[++pos];
                        out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                    } else {
                        out += text[pos];
                    }
                }
                out += '"';
                ++pos;
            } else if (c == '-' && text.compare(pos + 1, 2, std::string{closer, '}'}) == 0) {
                strip_next_raw = true;
                ++pos;
            } else if (c == closer && pos + 1 < text.size() && text[pos + 1] == '}') {
                out += closer;
                out += '}';
                pos += 2;
                closed = true;
            } else {
                if (!is_space(c)) out += c;
                ++pos;
            }
        }
        i = pos;
    }
    return out;
}

/// What identifies a family and what its renderer relies on.
struct FamilySignature {
    ChatTemplate family;
    std::vector<std::string_view> markers;  ///< all in the text: the template is meant to be this family
    std::vector<std::string_view> absent;   ///< none in the text (what sets a neighbouring family apart)
    /// The real template's tags the renderer transcribes, in the order they come, as written in the real template
    /// (compared in canonical form).
    std::vector<std::string_view> tags;
};

const std::vector<FamilySignature>& family_signatures() {
    static const std::vector<FamilySignature> signatures = {
        {ChatTemplate::Llama3,
         {"<|start_header_id|>", "<|eot_id|>"},
         {"Cutting Knowledge Date"},
         {R"({% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %})",
          R"({% if loop.index0 == 0 %})", R"({% set content = bos_token + content %})", R"({{ content }})",
          R"({% if add_generation_prompt %})", R"({{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }})"}},
        {ChatTemplate::Llama31,
         {"<|start_header_id|>", "Cutting Knowledge Date: December 2023"},
         {},
         {R"({{- bos_token }})", R"({%- set date_string = "26 Jul 2024" %})",
          R"({%- if messages[0]['role'] == 'system' %})", R"({%- set system_message = messages[0]['content']|trim %})",
          R"({%- set messages = messages[1:] %})", R"({%- set system_message = "" %})",
          R"({{- "<|start_header_id|>system<|end_header_id|>\n\n" }})",
          R"({{- "Cutting Knowledge Date: December 2023\n" }})", R"({{- "Today Date: " + date_string + "\n\n" }})",
          R"({{- system_message }})", R"({{- "<|eot_id|>" }})",
          R"({{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }})",
          R"({%- if add_generation_prompt %})", R"({{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }})"}},
        {ChatTemplate::ChatML,
         {"<|im_start|>"},
         {"<|im_start|>system\n", "<think>", "bos_token", "eos_token"},
         {R"({% for message in messages %})",
          R"({{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}})",
          R"({% endfor %})", R"({% if add_generation_prompt %})", R"({{ '<|im_start|>assistant\n' }})"}},
        {ChatTemplate::Qwen25,
         {"<|im_start|>", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
         {"<think>"},
         {R"({%- if messages[0]['role'] == 'system' %})",
          R"({{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }})",
          R"({{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }})",
          R"({%- for message in messages %})",
          R"({%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %})",
          R"({{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }})",
          R"({%- if add_generation_prompt %})", R"({{- '<|im_start|>assistant\n' }})"}},
        {ChatTemplate::Qwen3,
         {"<|im_start|>", "<think>"},
         {"You are Qwen"},
         {R"({%- if messages[0].role == 'system' %})",
          R"({{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }})",
          R"({%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %})",
          R"({%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %})",
          R"({%- set ns.last_query_index = index %})",
          R"({%- if (message.role == "user") or (message.role == "system" and not loop.first) %})",
          R"({{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }})",
          R"({%- set content = message.content.split('</think>')[-1].lstrip('\n') %})",
          R"({%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %})",
          R"({%- if loop.index0 > ns.last_query_index %})",
          R"({%- if loop.last or (not loop.last and reasoning_content) %})",
          R"({{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }})",
          R"({{- '<|im_start|>' + message.role + '\n' + content }})", R"({{- '<|im_end|>\n' }})",
          R"({%- if add_generation_prompt %})", R"({{- '<|im_start|>assistant\n' }})",
          R"({%- if enable_thinking is defined and enable_thinking is false %})"}},
        {ChatTemplate::SmolLM2,
         {"<|im_start|>", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
         {"<think>"},
         {R"({% for message in messages %})", R"({% if loop.first and messages[0]['role'] != 'system' %})",
          R"({{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }})",
          R"({{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}})",
          R"({% if add_generation_prompt %})", R"({{ '<|im_start|>assistant\n' }})"}},
        {ChatTemplate::Mistral,
         {"[INST]", "Only user and assistant roles are supported"},
         {"<<SYS>>"},
         {R"({{ bos_token }})", R"({% for message in messages %})",
          R"({% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %})",
          R"({{ '[INST] ' + message['content'] + ' [/INST]' }})", R"({{ message['content'] + eos_token + ' ' }})",
          R"({{ raise_exception('Only user and assistant roles are supported!') }})"}},
        {ChatTemplate::Llama2,
         {"[INST]", "<<SYS>>"},
         {"USE_DEFAULT_PROMPT"},
         {R"({% if messages[0]['role'] == 'system' %})", R"({% set loop_messages = messages[1:] %})",
          R"({% set system_message = messages[0]['content'] %})",
          R"({% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %})",
          R"({% if loop.index0 == 0 and system_message != false %})",
          R"({% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %})",
          R"({{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }})",
          R"({{ ' '  + content.strip() + ' ' + eos_token }})"}},
        {ChatTemplate::Zephyr,
         {"<|user|>", "eos_token"},
         {"<|end|>", "bos_token"},
         {R"({% for message in messages %})", R"({% if message['role'] == 'user' %})",
          "{{ '<|user|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}",
          "{{ '<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}",
          "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}",
          "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}", R"({% endfor %})"}},
        {ChatTemplate::Phi3,
         {"<|user|>", "<|end|>"},
         {"bos_token"},
         {R"({% for message in messages %})", R"({% if message['role'] == 'system' %})",
          R"({{'<|system|>\n' + message['content'] + '<|end|>\n'}})", R"({% elif message['role'] == 'user' %})",
          R"({{'<|user|>\n' + message['content'] + '<|end|>\n'}})", R"({% elif message['role'] == 'assistant' %})",
          R"({{'<|assistant|>\n' + message['content'] + '<|end|>\n'}})", R"({% endif %}{% endfor %})",
          R"({% if add_generation_prompt %})", R"({{ '<|assistant|>\n' }})",
          R"({% else %}{{ eos_token }}{% endif %})"}},
    };
    return signatures;
}

bool contains(std::string_view text, std::string_view piece) {
    return text.find(piece) != std::string_view::npos;
}

/// The family names that --chat-template takes, for messages.
std::string option_choices() {
    return fmt::format("{}", fmt::join(mode_names<ChatTemplate>(), ", "));
}

}  // namespace

ChatTemplate recognize_chat_template(std::string_view chat_template, std::string_view source) {
    const std::string canonical = canonical_template(chat_template);
    std::vector<const FamilySignature*> candidates;
    for (const FamilySignature& s : family_signatures()) {
        const bool marked =
            std::all_of(s.markers.begin(), s.markers.end(), [&](std::string_view m) { return contains(canonical, m); });
        const bool excluded =
            std::any_of(s.absent.begin(), s.absent.end(), [&](std::string_view m) { return contains(canonical, m); });
        if (marked && !excluded) candidates.push_back(&s);
    }
    KASCADE_CHECK(!candidates.empty(),
                  "{}: chat_template is none of the chat templates kascade renders; give {} NAME to render the prompt "
                  "as one of them ({}), or {} none to give the model the prompt as is",
                  source, kChatTemplateOption, option_choices(), kChatTemplateOption);
    // The markers are chosen so that no real template has two families' markers; a text that does is refused too.
    KASCADE_CHECK(candidates.size() == 1,
                  "{}: chat_template has the markers of both the {} and the {} template; give {} NAME|none to choose",
                  source, mode_name(candidates[0]->family), mode_name(candidates[1]->family), kChatTemplateOption);
    const FamilySignature& s = *candidates.front();
    size_t at = 0;
    for (std::string_view tag : s.tags) {
        const size_t found = canonical.find(canonical_template(tag), at);
        KASCADE_CHECK(found != std::string::npos,
                      "{}: chat_template looks like the {} template but differs from it: it lacks {} (after the part "
                      "that matches), so kascade cannot be sure to render it as the model's template does; give {} "
                      "NAME to render it as one of {} anyway, or {} none",
                      source, mode_name(s.family), tag, kChatTemplateOption, option_choices(), kChatTemplateOption);
        at = found + 1;
    }
    return s.family;
}

ChatTemplateChoice choose_chat_template(std::optional<ChatTemplate> named,
                                        const std::optional<TokenizerConfig>& config) {
    ChatTemplateChoice choice;
    if (config) choice.tokens = {config->bos_token, config->eos_token};
    if (named) {
        choice.family = *named;
    } else if (config && config->chat_template) {
        choice.family = recognize_chat_template(*config->chat_template, config->chat_template_path.string());
    }
    return choice;
}

ChatTemplateChoice choose_chat_template_for_model(std::optional<ChatTemplate> named,
                                                  const std::filesystem::path& model_dir) {
    const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
    std::error_code ec;
    std::optional<TokenizerConfig> config;
    if (std::filesystem::is_regular_file(config_path, ec)) {
        config = read_tokenizer_config_file(config_path, /*with_added_tokens=*/false, /*with_chat_template=*/true);
    }
    return choose_chat_template(named, config);
}

}  // namespace kascade
