// pipeline/stages/workspace.h: what every stage works in: the results store (SQLite + artifact folder) and the
// models and texts it has loaded, kept in memory so that a sweep loads and tokenizes each only once.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/store/results_db.h"
#include "io/tokenizer/tokenizer.h"
#include "io/weights/model_weights.h"

namespace kascade {

struct LoadedModel {
    std::filesystem::path path;
    std::filesystem::path tokenizer_path;
    ModelWeights weights;
    std::unique_ptr<Tokenizer> tokenizer;
    std::string model_hash;      ///< content hash of the weights and config files
    std::string tokenizer_hash;  ///< content hash of the tokenizer file
    int64_t model_id = 0;        ///< models.id
};

struct LoadedText {
    std::filesystem::path path;
    std::string hash;             ///< content hash of the file
    int64_t text_id = 0;          ///< texts.id
    std::vector<int32_t> tokens;  ///< corpus tokens with the model's tokenizer (see corpus_tokens.h)
};

class Workspace {
  public:
    /// Opens (creating if needed) the results folder and its database; removes partial artifact files left by
    /// killed processes.
    explicit Workspace(const std::filesystem::path& results_dir);

    ResultsDb& db() { return db_; }
    const std::filesystem::path& results_dir() const { return results_dir_; }

    /// Loads (once) the model and its tokenizer (tokenizer_path empty: the one next to the model).
    LoadedModel& model(const std::filesystem::path& path, const std::filesystem::path& tokenizer_path = {});
    /// Reads and tokenizes (once per tokenizer) a text file.
    LoadedText& text(const std::filesystem::path& path, const LoadedModel& model);
    /// The model a models.id refers to, loaded from its recorded path (for re-running a stage from a DB row).
    LoadedModel& model_by_id(int64_t model_id);

    /// The artifact is recorded in the database and its file is in place (a deleted file means: compute again).
    bool has_artifact(std::string_view key);

    /// Where the artifact of `stage` with `key` lives: <results>/artifacts/<stage>/<key>.h5.
    std::filesystem::path artifact_path(std::string_view stage, std::string_view key) const;
    std::string artifact_relative_path(std::string_view stage, std::string_view key) const;

  private:
    std::filesystem::path results_dir_;
    ResultsDb db_;
    std::map<std::string, std::unique_ptr<LoadedModel>> models_;  ///< by path + tokenizer path
    std::map<std::string, std::unique_ptr<LoadedText>> texts_;    ///< by path + tokenizer hash
};

/// Content hash of a model: the file itself, or every regular file of a model directory, in name order.
std::string model_content_hash(const std::filesystem::path& path);

}  // namespace kascade
