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
    ModelRecord record;          ///< its models row, stored by Workspace::stored_id when a result needs it
};

struct LoadedText {
    std::filesystem::path path;
    std::string hash;             ///< content hash of the file
    TextRecord record;            ///< its texts row, stored by Workspace::stored_id when a result needs it
    std::vector<int32_t> tokens;  ///< corpus tokens with the model's tokenizer (see corpus_tokens.h)
};

class Workspace {
  public:
    /// Opens (creating if needed) the results folder and its database; removes partial artifact files left by
    /// killed processes.
    explicit Workspace(const std::filesystem::path& results_dir);
    /// Left by an exception (a failed command), removes what this workspace created and only that, and only while
    /// it is empty: its database if no row was stored, then its folders if nothing is in them. Another process may
    /// have started using the same results folder meanwhile; what it made stays.
    ~Workspace();
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    ResultsDb& db() { return *db_; }
    const std::filesystem::path& results_dir() const { return results_dir_; }

    /// Loads (once) the model and its tokenizer (tokenizer_path empty: the one next to the model).
    LoadedModel& model(const std::filesystem::path& path, const std::filesystem::path& tokenizer_path = {});
    /// Reads and tokenizes (once per tokenizer) a text file.
    LoadedText& text(const std::filesystem::path& path, const LoadedModel& model);
    /// The models.id / texts.id of a loaded model or text, inserting its row if needed. Loading stores nothing, so
    /// that a command refused after loading leaves no row behind; call these only when storing a result.
    int64_t stored_id(const LoadedModel& model);
    int64_t stored_id(const LoadedText& text);
    /// The model a models.id refers to, loaded from its recorded path (for re-running a stage from a DB row).
    LoadedModel& model_by_id(int64_t model_id);

    /// The artifact is recorded in the database and its file is in place (a deleted file means: compute again).
    bool has_artifact(std::string_view key);

    /// Where the artifact of `stage` with `key` lives: <results>/artifacts/<stage>/<key>.h5.
    std::filesystem::path artifact_path(std::string_view stage, std::string_view key) const;
    /// The same for an artifact about to be written: its folders are made (and removed again if the command fails
    /// and they are still empty).
    std::filesystem::path new_artifact_path(std::string_view stage, std::string_view key);
    std::string artifact_relative_path(std::string_view stage, std::string_view key) const;

  private:
    void remove_what_was_created();

    std::filesystem::path results_dir_;
    std::vector<std::filesystem::path> created_dirs_;  ///< folders this workspace made, outermost first
    bool created_db_ = false;                          ///< this workspace made the database file
    int uncaught_at_open_ = 0;  ///< std::uncaught_exceptions() when opened, to tell a failure from a normal exit
    std::unique_ptr<ResultsDb> db_;
    std::map<std::string, std::unique_ptr<LoadedModel>> models_;  ///< by path + tokenizer path
    std::map<std::string, std::unique_ptr<LoadedText>> texts_;    ///< by path + tokenizer hash
};

/// Loads a model and its tokenizer (tokenizer_path empty: the one next to the model), without a results folder;
/// Workspace::model caches what this returns.
std::unique_ptr<LoadedModel> load_model_and_tokenizer(const std::filesystem::path& path,
                                                      const std::filesystem::path& tokenizer_path = {});
/// The texts row of a text file with these contents (its hash, absolute path and size).
TextRecord text_record(const std::filesystem::path& path, const std::string& contents);

/// Reads a text file and tokenizes it with the model's tokenizer; Workspace::text caches what this returns.
std::unique_ptr<LoadedText> load_corpus_text(const std::filesystem::path& path, const LoadedModel& model);

/// Content hash of a model: the file itself, or every regular file of a model directory, in name order.
std::string model_content_hash(const std::filesystem::path& path);

/// Content hash of a tokenizer: its file, and the tokenizer_config.json it read (which decides BOS, and for a
/// tiktoken tokenizer.model EOS and the special tokens). The one definition: `kascade` commands and a sweep's plan
/// must give the same keys.
std::string tokenizer_content_hash(const std::filesystem::path& tokenizer_path, const Tokenizer& tokenizer);

}  // namespace kascade
