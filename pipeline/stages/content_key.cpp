#include "pipeline/stages/content_key.h"

#include "io/file_util.h"

namespace kascade {

std::string content_key(std::string_view stage, int format_version, const nlohmann::json& inputs,
                        const nlohmann::json& params) {
    const nlohmann::json canonical = {
        {"stage", stage}, {"format_version", format_version}, {"inputs", inputs}, {"params", params}};
    return hash_hex(canonical.dump());
}

}  // namespace kascade
