// io/tokenizer/tokenizer_config.cpp: reading tokenizer_config.json.
#include "io/tokenizer/tokenizer_config.h"

#include <algorithm>
#include <charconv>
#include <system_error>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/json_fields.h"

namespace kascade {

namespace {

using nlohmann::json;

/// A special token: a string, or an object with "content" (what transformers writes for an AddedToken).
std::string special_token_content(const json& value) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_object() && value.contains("content") && value["content"].is_string()) {
        return value["content"].get<std::string>();
    }
    return {};
}

std::vector<std::pair<int32_t, std::string>> read_added_tokens(const json& decoder, const std::string& name) {
    std::vector<std::pair<int32_t, std::string>> tokens;
    if (decoder.is_null()) return tokens;
    KASCADE_CHECK(decoder.is_object(), "{}: added_tokens_decoder must be an object mapping ids to tokens, found {}",
                  name, decoder.type_name());
    for (const auto& [key, value] : decoder.items()) {
        int32_t id = -1;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        // Only the canonical spelling, so that "07" and "7" cannot name one id twice.
        KASCADE_CHECK(ec == std::errc() && end == key.data() + key.size() && id >= 0 && key == std::to_string(id),
                      "{}: added_tokens_decoder key '{}' is not a token id (expected a non-negative integer without "
                      "leading zeros)",
                      name, key);
        const std::string content = special_token_content(value);
        KASCADE_CHECK(!content.empty(),
                      "{}: added_tokens_decoder['{}'] must be an object with a non-empty string 'content', found {}",
                      name, key, value.dump());
        tokens.emplace_back(id, content);
    }
    std::sort(tokens.begin(), tokens.end());
    return tokens;
}

/// chat_template: a string, or a list of {name, template} of which transformers uses the one named "default".
std::optional<std::string> read_chat_template(const json& value, const std::string& name) {
    if (value.is_null()) return std::nullopt;
    if (value.is_string()) return value.get<std::string>();
    KASCADE_CHECK(value.is_array(),
                  "{}: chat_template must be a string or a list of {{\"name\", \"template\"}} objects, found {}", name,
                  value.type_name());
    for (const json& entry : value) {
        KASCADE_CHECK(entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
                          entry.contains("template") && entry["template"].is_string(),
                      "{}: each chat_template entry must be an object with string \"name\" and \"template\", found {}",
                      name, entry.dump());
        if (entry["name"] == "default") return entry["template"].get<std::string>();
    }
    KASCADE_FAIL("{}: chat_template lists no template named \"default\" (the one transformers applies)", name);
}

}  // namespace

TokenizerConfig read_tokenizer_config_file(const std::filesystem::path& config_path, bool with_added_tokens,
                                           bool with_chat_template) {
    TokenizerConfig result;
    result.path = config_path;
    const std::string name = result.path.string();
    json config;
    try {
        config = json::parse(read_file(result.path));
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large for a double
        KASCADE_FAIL("{}: not valid JSON: {}", name, e.what());
    }
    KASCADE_CHECK(config.is_object(), "{}: expected a JSON object at the top level, found {}", name,
                  config.type_name());
    result.bos_token = special_token_content(field_or_null(config, "bos_token"));
    result.eos_token = special_token_content(field_or_null(config, "eos_token"));
    auto flag = [&](const char* key) -> std::optional<bool> {
        const json& value = field_or_null(config, key);
        if (value.is_null()) return std::nullopt;
        KASCADE_CHECK(value.is_boolean(), "{}: {} = {} must be true, false or null", name, key, value.dump());
        return value.get<bool>();
    };
    result.add_bos_token = flag("add_bos_token");
    result.add_eos_token = flag("add_eos_token");
    if (with_added_tokens) result.added_tokens = read_added_tokens(field_or_null(config, "added_tokens_decoder"), name);
    if (with_chat_template) {
        result.chat_template = read_chat_template(field_or_null(config, "chat_template"), name);
        result.chat_template_path = result.path;
        // Newer transformers versions save the template beside the config instead of inside it.
        const std::filesystem::path beside = result.path.parent_path() / "chat_template.jinja";
        std::error_code ec;
        if (!result.chat_template && std::filesystem::exists(beside, ec)) {
            result.chat_template = read_file(beside);
            result.chat_template_path = beside;
        }
    }
    return result;
}

std::optional<TokenizerConfig> read_tokenizer_config(const std::filesystem::path& tokenizer_path,
                                                     bool with_added_tokens) {
    const std::filesystem::path config_path = tokenizer_path.parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(config_path, ec)) return std::nullopt;
    return read_tokenizer_config_file(config_path, with_added_tokens, /*with_chat_template=*/false);
}

}  // namespace kascade
