#include "pipeline/stages/artifact_provenance.h"

#include "build_info.h"
#include "io/file_util.h"

namespace kascade {

ArtifactHeader make_artifact_header(std::string_view stage, const std::string& key, const nlohmann::json& inputs,
                                    const nlohmann::json& params, const std::string& model_hash,
                                    const std::string& text_hash, const std::string& tokenizer_hash) {
    ArtifactHeader h;
    h.stage = std::string(stage);
    h.key = key;
    h.input_keys_json = inputs.dump();
    h.params_json = params.dump();
    h.model_hash = model_hash;
    h.text_hash = text_hash;
    h.tokenizer_hash = tokenizer_hash;
    h.kascade_version = KASCADE_VERSION;
    h.git_commit = KASCADE_GIT_COMMIT;
    h.created_at = utc_now();
    return h;
}

ArtifactRecord make_artifact_record(const Workspace& ws, const ArtifactHeader& header, int64_t model_id,
                                    int format_version) {
    ArtifactRecord r;
    r.key = header.key;
    r.stage = header.stage;
    r.path = ws.artifact_relative_path(header.stage, header.key);
    r.model_id = model_id;
    r.format_version = format_version;
    r.params_json = header.params_json;
    r.input_keys_json = header.input_keys_json;
    const std::filesystem::path file = ws.artifact_path(header.stage, header.key);
    r.bytes = static_cast<int64_t>(std::filesystem::file_size(file));
    r.checksum = hash_file_hex(file);
    return r;
}

}  // namespace kascade
