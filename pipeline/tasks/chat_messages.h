// pipeline/tasks/chat_messages.h: a conversation read from a JSON messages file, the input of `kascade chat`.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "pipeline/tasks/chat_template.h"

namespace kascade {

/// The conversation in `json_text`: a non-empty JSON array of {"role": "system"|"user"|"assistant", "content":
/// string} objects (the messages of transformers' apply_chat_template, without tools or reasoning fields, which
/// would change what a template renders and are refused). Throws kascade::Error naming `source`, the element
/// ([2]) and the field for anything else: not JSON, not an array, an element that is not an object, an unknown role,
/// a missing or non-string content, another key.
std::vector<ChatMessage> parse_chat_messages(std::string_view json_text, std::string_view source);

/// parse_chat_messages of the file at `path`.
std::vector<ChatMessage> read_chat_messages(const std::filesystem::path& path);

}  // namespace kascade
