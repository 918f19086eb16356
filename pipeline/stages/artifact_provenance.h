// pipeline/stages/artifact_provenance.h: what every stage records about an artifact it writes: the root
// attributes of the HDF5 file (ArtifactHeader) and its row in the `artifacts` cache index.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "io/store/h5_file.h"
#include "pipeline/stages/workspace.h"

namespace kascade {

/// The header of a new artifact: its identity and inputs, the hashes of the model, text and tokenizer it derives
/// from, and this build's version, git commit and the time.
ArtifactHeader make_artifact_header(std::string_view stage, const std::string& key, const nlohmann::json& inputs,
                                    const nlohmann::json& params, const std::string& model_hash,
                                    const std::string& text_hash, const std::string& tokenizer_hash);

/// The `artifacts` row of an artifact whose file has been committed to its place in the workspace.
ArtifactRecord make_artifact_record(const Workspace& ws, const ArtifactHeader& header, int64_t model_id,
                                    int format_version);

}  // namespace kascade
