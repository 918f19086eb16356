// pipeline/tasks/chat_messages.cpp: reading a JSON messages file.
#include "pipeline/tasks/chat_messages.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"

namespace kascade {

std::vector<ChatMessage> parse_chat_messages(std::string_view json_text, std::string_view source) {
    using nlohmann::json;
    json messages;
    try {
        messages = json::parse(json_text);
    } catch (const json::exception& e) {  // parse_error (also ill-formed UTF-8), or out_of_range for a huge number
        KASCADE_FAIL("{}: not valid JSON: {}", source, e.what());
    }
    KASCADE_CHECK(messages.is_array(), "{}: expected a JSON array of {{\"role\", \"content\"}} objects, found {}",
                  source, messages.type_name());
    KASCADE_CHECK(!messages.empty(), "{}: the array of messages is empty (expected at least one message)", source);
    std::vector<ChatMessage> out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        KASCADE_CHECK(m.is_object(), "{}: [{}] must be an object with \"role\" and \"content\", found {}", source, i,
                      m.type_name());
        for (const auto& [key, value] : m.items()) {
            KASCADE_CHECK(key == "role" || key == "content",
                          "{}: [{}] has the key \"{}\"; only \"role\" and \"content\" are read (tools, tool calls "
                          "and reasoning fields change what a template renders and are not supported)",
                          source, i, key);
        }
        KASCADE_CHECK(m.contains("role") && m["role"].is_string(), "{}: [{}] needs a string \"role\" ({}), found {}",
                      source, i, fmt::join(mode_names<ChatRole>(), ", "),
                      m.contains("role") ? m["role"].dump() : std::string("none"));
        KASCADE_CHECK(m.contains("content") && m["content"].is_string(),
                      "{}: [{}] needs a string \"content\", found {}", source, i,
                      m.contains("content") ? m["content"].dump() : std::string("none"));
        const ChatRole role =
            parse_mode<ChatRole>(m["role"].get<std::string>(), fmt::format("{}: [{}].role", source, i));
        out.push_back({role, m["content"].get<std::string>()});
    }
    return out;
}

std::vector<ChatMessage> read_chat_messages(const std::filesystem::path& path) {
    return parse_chat_messages(read_file(path), path.string());
}

}  // namespace kascade
