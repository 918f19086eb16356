#include "pipeline/stages/workspace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/file_util.h"
#include "io/text_file.h"
#include "pipeline/runtime/corpus_tokens.h"
#include "pipeline/runtime/sequence_start.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

/// Makes `dir` and the missing folders above it, appending to `created` those this process made (a folder another
/// process makes at the same moment is not counted: mkdir succeeds for one of them only).
void make_folders(const fs::path& dir, std::vector<fs::path>& created) {
    if (dir.empty() || fs::is_directory(dir)) return;
    make_folders(dir.parent_path(), created);
    std::error_code ec;
    if (fs::create_directory(dir, ec)) created.push_back(dir);
    // A failure is reported by whoever needs the folder next (the database, the artifact writer), with its reason.
}

/// Creates `file` empty if it does not exist; whether this process made it.
bool create_file_exclusively(const fs::path& file) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
    return true;
}

/// Removes partial artifact files whose writer, a process of this host, no longer exists: a killed stage.
void remove_stale_partial_files(const fs::path& artifacts_dir) {
    std::error_code ec;
    if (!fs::is_directory(artifacts_dir, ec)) return;
    for (const auto& entry : fs::recursive_directory_iterator(artifacts_dir, ec)) {
        if (is_abandoned_partial(entry.path().filename().string())) fs::remove(entry.path(), ec);
    }
}

}  // namespace

std::string model_content_hash(const fs::path& path) {
    if (!fs::is_directory(path)) return hash_file_hex(path);
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    std::string hashes;
    for (const fs::path& f : files) hashes += f.filename().string() + ":" + hash_file_hex(f) + ";";
    return hash_hex(hashes);
}

std::string tokenizer_content_hash(const fs::path& tokenizer_path, const Tokenizer& tokenizer) {
    // The tokenizer_config.json the tokenizer read is part of what the tokenizer is: a change to it must not reuse
    // captures and runs made under the old rule.
    const fs::path config = tokenizer.config_file();
    return config.empty() ? hash_file_hex(tokenizer_path)
                          : hash_hex(hash_file_hex(tokenizer_path) + hash_file_hex(config));
}

std::unique_ptr<LoadedModel> load_model_and_tokenizer(const fs::path& path, const fs::path& tokenizer_path) {
    auto m = std::make_unique<LoadedModel>();
    m->path = path;
    m->weights = load_model(path);
    m->tokenizer_path = tokenizer_path.empty() ? find_tokenizer_for_model(path) : tokenizer_path;
    KASCADE_CHECK(!m->tokenizer_path.empty(),
                  "no tokenizer found next to model \"{}\" (looked for tokenizer.json, tokenizer.model, "
                  "tokenizer*.bin, tok*.bin); give one with --tokenizer",
                  path.string());
    m->tokenizer = load_tokenizer(m->tokenizer_path);
    KASCADE_CHECK(m->tokenizer->vocab_size() <= m->weights.config.vocab_size,
                  "tokenizer \"{}\" has {} tokens but model \"{}\" only {}: they do not belong together",
                  m->tokenizer_path.string(), m->tokenizer->vocab_size(), path.string(), m->weights.config.vocab_size);
    m->model_hash = model_content_hash(path);
    m->tokenizer_hash = tokenizer_content_hash(m->tokenizer_path, *m->tokenizer);
    const ModelConfig& c = m->weights.config;
    ModelRecord& record = m->record;
    record.hash = m->model_hash;
    record.path = fs::absolute(path).lexically_normal().string();
    record.format = m->weights.format;
    record.model_type = c.model_type;
    record.n_layers = c.n_layers;
    record.n_heads = c.n_heads;
    record.n_kv_heads = c.n_kv_heads;
    record.head_dim = c.head_dim;
    record.dim = c.dim;
    record.vocab_size = c.vocab_size;
    return m;
}

TextRecord text_record(const fs::path& path, const std::string& contents) {
    TextRecord record;
    record.hash = hash_hex(contents);
    record.path = fs::absolute(path).lexically_normal().string();
    record.bytes = static_cast<int64_t>(contents.size());
    return record;
}

std::unique_ptr<LoadedText> load_corpus_text(const fs::path& path, const LoadedModel& model) {
    auto t = std::make_unique<LoadedText>();
    t->path = path;
    const std::string contents = read_text_file(path);
    const ModelConfig& c = model.weights.config;
    t->tokens = tokenize_corpus(*model.tokenizer, contents, document_boundary_token(c, model.tokenizer.get()));
    t->record = text_record(path, contents);
    t->hash = t->record.hash;
    return t;
}

Workspace::Workspace(const fs::path& results_dir) : results_dir_(results_dir) {
    make_folders(results_dir_, created_dirs_);
    // SQLite takes an empty file for a new database; made here with O_EXCL, it is known to be this process's.
    created_db_ = create_file_exclusively(results_dir_ / ResultsDb::kFileName);
    uncaught_at_open_ = std::uncaught_exceptions();
    try {
        db_ = std::make_unique<ResultsDb>(results_dir);
    } catch (...) {
        remove_what_was_created();
        throw;
    }
    remove_stale_partial_files(results_dir_ / "artifacts");
}

Workspace::~Workspace() {
    if (std::uncaught_exceptions() > uncaught_at_open_) remove_what_was_created();
}

void Workspace::remove_what_was_created() {
    std::error_code ec;
    // Only a database that is still empty is removed: rows mean another process has started using it too.
    bool remove_db = created_db_;
    try {
        remove_db = remove_db && (db_ == nullptr || !db_->has_rows());
    } catch (const std::exception&) {
        remove_db = false;  // leave what cannot be checked
    }
    if (remove_db) {
        db_.reset();
        for (const char* suffix : {"", "-wal", "-shm"}) {
            fs::remove(results_dir_ / (std::string(ResultsDb::kFileName) + suffix), ec);
        }
    }
    // Innermost first; remove() takes a folder only when it is empty, so whatever another process put there stays.
    for (auto dir = created_dirs_.rbegin(); dir != created_dirs_.rend(); ++dir) fs::remove(*dir, ec);
}

int64_t Workspace::stored_id(const LoadedModel& model) {
    return db_->upsert_model(model.record);
}

int64_t Workspace::stored_id(const LoadedText& text) {
    return db_->upsert_text(text.record);
}

LoadedModel& Workspace::model(const fs::path& path, const fs::path& tokenizer_path) {
    const std::string cache_key = fs::absolute(path).string() + "|" + tokenizer_path.string();
    auto it = models_.find(cache_key);
    if (it != models_.end()) return *it->second;
    return *models_.emplace(cache_key, load_model_and_tokenizer(path, tokenizer_path)).first->second;
}

LoadedModel& Workspace::model_by_id(int64_t model_id) {
    const std::optional<ModelRecord> record = db_->find_model(model_id);
    KASCADE_CHECK(record.has_value(), "{}: no model with id {}", db_->db_file().string(), model_id);
    KASCADE_CHECK(fs::exists(record->path), "model {} was loaded from \"{}\", which no longer exists", model_id,
                  record->path);
    LoadedModel& m = model(record->path);
    KASCADE_CHECK(m.model_hash == record->hash, "model file \"{}\" has changed since it was recorded (hash {} now {})",
                  record->path, record->hash, m.model_hash);
    return m;
}

LoadedText& Workspace::text(const fs::path& path, const LoadedModel& model) {
    const std::string cache_key = fs::absolute(path).string() + "|" + model.tokenizer_hash;
    auto it = texts_.find(cache_key);
    if (it != texts_.end()) return *it->second;
    return *texts_.emplace(cache_key, load_corpus_text(path, model)).first->second;
}

bool Workspace::has_artifact(std::string_view key) {
    const std::optional<ArtifactRecord> record = db_->find_artifact(key);
    return record.has_value() && fs::exists(results_dir_ / record->path);
}

fs::path Workspace::artifact_path(std::string_view stage, std::string_view key) const {
    return results_dir_ / artifact_relative_path(stage, key);
}

fs::path Workspace::new_artifact_path(std::string_view stage, std::string_view key) {
    fs::path path = artifact_path(stage, key);
    make_folders(path.parent_path(), created_dirs_);
    return path;
}

std::string Workspace::artifact_relative_path(std::string_view stage, std::string_view key) const {
    return fmt::format("artifacts/{}/{}.h5", stage, key);
}

}  // namespace kascade
