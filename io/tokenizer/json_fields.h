// io/tokenizer/json_fields.h: optional fields of the Hugging Face JSON files beside a tokenizer (tokenizer.json,
// tokenizer_config.json).
#pragma once

#include <nlohmann/json.hpp>

namespace kascade {

/// object[key], or a JSON null when the object has no such field (a const json's operator[] needs it to exist).
inline const nlohmann::json& field_or_null(const nlohmann::json& object, const char* key) {
    static const nlohmann::json null_value;
    return object.contains(key) ? object[key] : null_value;
}

}  // namespace kascade
