// pipeline/stages/content_key.h: the content address of a stage output.
//
// key = hash(stage name, the stage's format version, the keys/hashes of its inputs, its parameters), all as
// canonical JSON (nlohmann::json sorts object keys). Changing any input or parameter, or bumping the stage's
// format version when its output changes meaning, gives a new key; the same inputs give the same key, which is
// what makes a repeated sweep a cache hit.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kascade {

std::string content_key(std::string_view stage, int format_version, const nlohmann::json& inputs,
                        const nlohmann::json& params);

}  // namespace kascade
