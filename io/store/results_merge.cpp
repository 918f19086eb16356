// io/store/results_merge.cpp: merging results folders (see results_merge.h).
#include "io/store/results_merge.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/ranges.h>

#include "io/atomic_file.h"
#include "io/file_util.h"
#include "io/store/h5_file.h"
#include "io/store/record_sql.h"

namespace kascade {

namespace fs = std::filesystem;
using namespace store_sql;

namespace {

/// What the source holds, read in full before anything is written.
struct SourceRows {
    std::vector<ModelRecord> models;
    std::vector<TextRecord> texts;
    std::vector<ArtifactRecord> artifacts;
    std::map<std::string, CaptureRecord> captures;         // by artifact key
    std::map<std::string, SimilarityRecord> similarities;  // by artifact key
    std::vector<ScheduleRecord> schedules;
    std::vector<RunRecord> runs;
    std::vector<TaskRunRecord> task_runs;
};

/// Refuses a source whose rows refer to rows it does not have (a damaged or hand-edited database): merging it would
/// break the destination's references. Checked here, not by the schema's foreign keys, which only a database that
/// kept its schema intact declares.
void check_links(const SourceRows& s, const fs::path& db_file) {
    std::set<std::int64_t> models, texts, schedules;
    for (const ModelRecord& m : s.models) models.insert(m.id);
    for (const TextRecord& t : s.texts) texts.insert(t.id);
    for (const ScheduleRecord& r : s.schedules) schedules.insert(r.id);
    std::set<std::string> artifacts;
    for (const ArtifactRecord& a : s.artifacts) artifacts.insert(a.key);
    auto check = [&](bool holds, std::string_view row, const std::string& key, std::string_view what) {
        KASCADE_CHECK(holds, "{}: not a consistent results database: {} {} refers to {} it does not have",
                      db_file.string(), row, key, what);
    };
    for (const ArtifactRecord& a : s.artifacts) check(models.count(a.model_id), "artifact", a.key, "a model");
    for (const auto& [key, c] : s.captures) {
        check(artifacts.count(key), "capture", key, "an artifact row");
        check(models.count(c.model_id) && texts.count(c.text_id), "capture", key, "a model or text");
    }
    for (const auto& [key, sim] : s.similarities) {
        check(artifacts.count(key), "similarity", key, "an artifact row");
        check(s.captures.count(sim.capture_key), "similarity", key, "capture " + sim.capture_key);
    }
    for (const ScheduleRecord& r : s.schedules) {
        check(models.count(r.model_id), "schedule", r.key, "a model");
        if (r.similarity_key)
            check(s.similarities.count(*r.similarity_key), "schedule", r.key, "similarity " + *r.similarity_key);
    }
    for (const RunRecord& r : s.runs) {
        check(models.count(r.model_id) && texts.count(r.text_id), "run", r.key, "a model or text");
        if (r.schedule_id)
            check(schedules.count(*r.schedule_id), "run", r.key, fmt::format("schedule id {}", *r.schedule_id));
    }
    for (const TaskRunRecord& r : s.task_runs) {
        check(models.count(r.model_id) && (!r.text_id || texts.count(*r.text_id)), "task run", r.key,
              "a model or text");
        if (r.schedule_id)
            check(schedules.count(*r.schedule_id), "task run", r.key, fmt::format("schedule id {}", *r.schedule_id));
    }
}

SourceRows read_source(SQLite::Database& db, const fs::path& db_file) {
    SourceRows s;
    s.models = select_records<ModelRecord>(db, "ORDER BY id");
    s.texts = select_records<TextRecord>(db, "ORDER BY id");
    s.artifacts = select_records<ArtifactRecord>(db, "ORDER BY created_at, key");
    for (CaptureRecord& c : select_records<CaptureRecord>(db, "")) s.captures.emplace(c.artifact_key, std::move(c));
    for (SimilarityRecord& r : select_records<SimilarityRecord>(db, ""))
        s.similarities.emplace(r.artifact_key, std::move(r));
    s.schedules = select_records<ScheduleRecord>(db, "ORDER BY id");
    s.runs = select_records<RunRecord>(db, "ORDER BY id");
    s.task_runs = select_records<TaskRunRecord>(db, "ORDER BY id");
    check_links(s, db_file);
    return s;
}

/// The keys to merge: the requested ones and everything they derive from.
std::set<std::string> close_over_inputs(const SourceRows& s, const std::set<std::string>& keys) {
    std::set<std::string> out = keys;
    std::map<std::int64_t, std::string> schedule_key_by_id;
    for (const ScheduleRecord& r : s.schedules) schedule_key_by_id[r.id] = r.key;
    for (const RunRecord& r : s.runs) {
        if (out.count(r.key) && r.schedule_id) out.insert(schedule_key_by_id.at(*r.schedule_id));
    }
    for (const TaskRunRecord& r : s.task_runs) {
        if (out.count(r.key) && r.schedule_id) out.insert(schedule_key_by_id.at(*r.schedule_id));
    }
    for (const ScheduleRecord& r : s.schedules) {
        if (out.count(r.key) && r.similarity_key) out.insert(*r.similarity_key);
    }
    for (const auto& [key, sim] : s.similarities) {
        if (out.count(key)) out.insert(sim.capture_key);
    }
    return out;
}

int stage_order(const std::string& stage) {
    return stage == "capture" ? 0 : stage == "similarity" ? 1 : 2;
}

bool exists_by_key(SQLite::Database& db, std::string_view table, std::string_view column, const std::string& key) {
    SQLite::Statement st(db, fmt::format("SELECT 1 FROM {} WHERE {} = ?", table, column));
    st.bind(1, key);
    return st.executeStep();
}

std::int64_t id_by_key(SQLite::Database& db, std::string_view table, std::string_view column, const std::string& key) {
    SQLite::Statement st(db, fmt::format("SELECT id FROM {} WHERE {} = ?", table, column));
    st.bind(1, key);
    KASCADE_ASSERT(st.executeStep());
    return st.getColumn(0).getInt64();
}

/// The one path an artifact may have, artifacts/<stage>/<key>.h5 (what every stage writes); anything else (a path
/// leaving the results folder, another artifact's file) is refused.
bool canonical_artifact_path(const ArtifactRecord& a) {
    const bool plain_key = !a.key.empty() && std::all_of(a.key.begin(), a.key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    const bool known_stage = a.stage == "capture" || a.stage == "similarity" || a.stage == "schedule";
    return plain_key && known_stage && a.path == fmt::format("artifacts/{}/{}.h5", a.stage, a.key);
}

/// The XXH3 of a file, or the reason it cannot be read.
std::optional<std::string> file_checksum(const fs::path& file, std::string& problem) {
    try {
        return hash_file_hex(file);
    } catch (const Error& e) {
        problem = e.what();
        return std::nullopt;
    }
}

/// The checksum of the source's file of artifact `a`, verified against its row; or, in `problem`, why it cannot be
/// taken. A row stored before checksums is vouched for by the file's size and root attributes instead.
std::optional<std::string> verified_source_checksum(const fs::path& source_dir, const ArtifactRecord& a,
                                                    std::string& problem) {
    if (!canonical_artifact_path(a)) {
        problem = fmt::format(
            "{}: the {} artifact {} has path \"{}\", not artifacts/{}/{}.h5; refusing a file outside "
            "its place in the results folder",
            (source_dir / ResultsDb::kFileName).string(), a.stage, a.key, a.path, a.stage, a.key);
        return std::nullopt;
    }
    const fs::path from = source_dir / a.path;
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(from, ec);  // a link is not the file its row recorded
    if (!fs::exists(status)) {
        problem = fmt::format("{}: missing in the shard (its {} artifact {} is recorded, the file is not)",
                              from.string(), a.stage, a.key);
        return std::nullopt;
    }
    if (!fs::is_regular_file(status)) {
        problem = fmt::format("{}: not a regular file (the {} artifact {})", from.string(), a.stage, a.key);
        return std::nullopt;
    }
    const std::optional<std::string> found = file_checksum(from, problem);
    if (!found) return std::nullopt;
    if (a.checksum) {
        if (*found == *a.checksum) return found;
        problem = fmt::format("{}: damaged: its checksum is {}, the shard recorded {} for its {} artifact {}",
                              from.string(), *found, *a.checksum, a.stage, a.key);
        return std::nullopt;
    }
    const std::uintmax_t bytes = fs::file_size(from, ec);
    if (ec || bytes != static_cast<std::uintmax_t>(a.bytes)) {
        problem = fmt::format(
            "{}: damaged: {} bytes, the shard recorded {} for its {} artifact {} (stored without a "
            "checksum)",
            from.string(), ec ? 0 : bytes, a.bytes, a.stage, a.key);
        return std::nullopt;
    }
    try {
        const H5ArtifactReader reader(from, a.format_version, a.format_version, a.stage, a.key);
    } catch (const Error& e) {
        problem = fmt::format("{} (stored without a checksum)", e.what());
        return std::nullopt;
    }
    return found;
}

/// The artifact files a merge takes: their verified checksums, by key, and why the others cannot be taken.
struct FilePlan {
    std::map<std::string, std::string> checksums;
    std::vector<std::string> problems;
};

FilePlan plan_files(const std::vector<ArtifactRecord>& artifacts, const fs::path& source_dir, const fs::path& dest_dir,
                    SQLite::Database* dest, std::set<std::string>& taken) {
    FilePlan plan;
    for (const ArtifactRecord& a : artifacts) {
        if (taken.count(a.key) || (dest != nullptr && exists_by_key(*dest, ArtifactRecord::table, "key", a.key)))
            continue;  // the destination has it, or an earlier source of this merge gives it
        std::string problem;
        const std::optional<std::string> checksum = verified_source_checksum(source_dir, a, problem);
        if (checksum) {
            // A file already where this one goes must be this one (a copy an interrupted merge left); anything
            // else belongs to someone else and is neither replaced nor registered.
            const fs::path to = dest_dir / a.path;
            std::error_code ec;
            if (fs::exists(fs::symlink_status(to, ec))) {
                std::string unreadable;
                const std::optional<std::string> there =
                    fs::is_regular_file(to, ec) ? file_checksum(to, unreadable) : std::nullopt;
                if (there != checksum) {
                    problem = fmt::format(
                        "{}: already exists and is not the shard's {} artifact {} (checksum {}, the shard's file {}); "
                        "move it away and merge again",
                        to.string(), a.stage, a.key, there.value_or("unreadable"), *checksum);
                }
            }
        }
        if (!problem.empty()) {
            plan.problems.push_back(problem);
            continue;
        }
        plan.checksums.emplace(a.key, *checksum);
        taken.insert(a.key);
    }
    return plan;
}

/// The selected artifacts of a source, captures before similarities before schedules.
std::vector<ArtifactRecord> selected_artifacts(const SourceRows& rows, const std::set<std::string>* keys) {
    std::set<std::string> wanted;
    if (keys != nullptr) wanted = close_over_inputs(rows, *keys);
    std::vector<ArtifactRecord> artifacts;
    for (const ArtifactRecord& a : rows.artifacts) {
        if (keys == nullptr || wanted.count(a.key)) artifacts.push_back(a);
    }
    std::stable_sort(artifacts.begin(), artifacts.end(), [](const ArtifactRecord& a, const ArtifactRecord& b) {
        return stage_order(a.stage) < stage_order(b.stage);
    });
    return artifacts;
}

/// Files copied by one merge_results call, removed again unless it commits.
class CopiedFiles {
  public:
    CopiedFiles() = default;
    CopiedFiles(const CopiedFiles&) = delete;
    CopiedFiles& operator=(const CopiedFiles&) = delete;
    ~CopiedFiles() {
        std::error_code ignored;
        for (const fs::path& file : files_) fs::remove(file, ignored);
    }
    void add(const fs::path& file) { files_.push_back(file); }
    void keep() { files_.clear(); }

  private:
    std::vector<fs::path> files_;
};

/// Copies (or links) a verified source file to `to` and hashes what arrived: a copy that differs from what was
/// verified is removed and refused.
void copy_verified(const fs::path& from, const fs::path& to, const std::string& checksum, CopiedFiles& copied) {
    copy_file_atomic(from, to);
    copied.add(to);
    std::error_code ec;
    if (fs::equivalent(from, to, ec)) return;  // a hard link: the very bytes verified
    std::string problem;
    const std::optional<std::string> arrived = file_checksum(to, problem);
    KASCADE_CHECK(arrived == checksum, "{}: the copy of {} has checksum {}, the file {} ({}); nothing was merged",
                  to.string(), from.string(), arrived.value_or("unreadable"), checksum, problem);
}

/// Inserts every row of R that dest does not have (a conflict on a unique column = has it); returns the count.
template <class R>
std::int64_t insert_missing(SQLite::Database& dest, const std::vector<R>& rows, std::string_view conflict) {
    std::int64_t added = 0;
    SQLite::Statement st(dest, insert_sql<R>(conflict));
    for (const R& row : rows) {
        st.reset();
        bind_record(st, row);
        st.exec();
        added += dest.getChanges();
    }
    return added;
}

/// Copies the artifact files a merge takes: each verified file the destination lacks, and the file of a row the
/// destination has whose file is gone, where the source's file verifies as the same. Returns how many it copied.
std::int64_t copy_artifact_files(ResultsDb& source, ResultsDb& dest, const std::vector<ArtifactRecord>& artifacts,
                                 const FilePlan& plan, std::string_view what, CopiedFiles& copied) {
    std::int64_t files = 0;
    for (const ArtifactRecord& a : artifacts) {
        const fs::path from = source.results_dir() / a.path, to = dest.results_dir() / a.path;
        std::error_code ec;
        if (const auto it = plan.checksums.find(a.key); it != plan.checksums.end()) {
            if (fs::exists(fs::symlink_status(to, ec))) continue;  // verified: the very file
            copy_verified(from, to, it->second, copied);
            ++files;
            continue;
        }
        // The destination has the row: its file, if gone, comes back from a source file that verifies as the same.
        if (fs::exists(fs::symlink_status(to, ec))) continue;
        const std::optional<ArtifactRecord> there = guarded(
            dest.db_file(), what, [&] { return select_one<ArtifactRecord>(dest.database(), "WHERE key = ?", a.key); });
        std::string problem;
        const std::optional<std::string> checksum = verified_source_checksum(source.results_dir(), a, problem);
        if (!there || !checksum || there->path != a.path || (there->checksum && there->checksum != checksum)) continue;
        copy_verified(from, to, *checksum, copied);
        ++files;
    }
    return files;
}

/// Writes the source's rows that the destination lacks, inside the merge's transaction, renumbering their ids and
/// the references between them. One method per table group, called in the order the rows depend on each other.
class RowMerge {
  public:
    /// wanted: the keys to merge (requested and what they derive from); nullptr: everything.
    RowMerge(SQLite::Database& src, SQLite::Database& dst, const SourceRows& rows, const std::set<std::string>* wanted,
             MergeCounts& counts)
        : src_(src), dst_(dst), rows_(rows), wanted_(wanted), counts_(counts) {}

    /// Every model and text, also those no merged row refers to.
    void merge_models_and_texts() {
        for (const ModelRecord& m : rows_.models) dest_model(m.id);
        for (const TextRecord& t : rows_.texts) dest_text(t.id);
    }

    /// The artifact rows whose files were verified (plan_files), with their capture or similarity details.
    void merge_artifacts(const std::vector<ArtifactRecord>& artifacts, const FilePlan& plan) {
        for (ArtifactRecord a : artifacts) {
            const auto verified = plan.checksums.find(a.key);
            if (verified == plan.checksums.end() || exists_by_key(dst_, ArtifactRecord::table, "key", a.key)) {
                ++counts_.skipped;
                continue;
            }
            if (!a.checksum) ++counts_.checksums;
            a.checksum = verified->second;  // rows stored before checksums get the one their file was verified by
            a.model_id = dest_model(a.model_id);
            insert_record(dst_, a);
            ++counts_.artifacts;
            if (auto c = rows_.captures.find(a.key); c != rows_.captures.end()) {
                CaptureRecord detail = c->second;
                detail.model_id = dest_model(detail.model_id);
                detail.text_id = dest_text(detail.text_id);
                insert_record(dst_, detail, " ON CONFLICT(artifact_key) DO NOTHING");
            }
            if (auto s = rows_.similarities.find(a.key); s != rows_.similarities.end()) {
                insert_record(dst_, s->second, " ON CONFLICT(artifact_key) DO NOTHING");
            }
        }
    }

    /// The schedules with their layers; remembers every selected schedule's destination id for the runs.
    void merge_schedules() {
        for (ScheduleRecord s : rows_.schedules) {
            if (!selected(s.key)) continue;
            const std::int64_t source_id = s.id;
            if (exists_by_key(dst_, ScheduleRecord::table, "key", s.key)) {
                ++counts_.skipped;
            } else {
                s.model_id = dest_model(s.model_id);
                insert_record(dst_, s);
                const std::int64_t id = dst_.getLastInsertRowid();
                std::vector<ScheduleLayerRecord> layers =
                    select_records<ScheduleLayerRecord>(src_, "WHERE schedule_id = ? ORDER BY layer", source_id);
                for (ScheduleLayerRecord& l : layers) l.schedule_id = id;
                insert_missing(dst_, layers, "");
                ++counts_.schedules;
            }
            schedule_id_[source_id] = id_by_key(dst_, ScheduleRecord::table, "key", s.key);
        }
    }

    /// The runs with their metrics and per-layer rows.
    void merge_runs() {
        for (RunRecord r : rows_.runs) {
            if (!selected(r.key)) continue;
            if (exists_by_key(dst_, RunRecord::table, "key", r.key)) {
                ++counts_.skipped;
                continue;
            }
            const std::int64_t source_id = r.id;
            r.model_id = dest_model(r.model_id);
            r.text_id = dest_text(r.text_id);
            if (r.schedule_id) r.schedule_id = schedule_id_.at(*r.schedule_id);
            insert_record(dst_, r);
            const std::int64_t id = dst_.getLastInsertRowid();
            std::vector<RunMetrics> metrics = select_records<RunMetrics>(src_, "WHERE run_id = ?", source_id);
            std::vector<RunLayerRecord> layers =
                select_records<RunLayerRecord>(src_, "WHERE run_id = ? ORDER BY layer", source_id);
            for (RunMetrics& m : metrics) m.run_id = id;
            for (RunLayerRecord& l : layers) l.run_id = id;
            insert_missing(dst_, metrics, "");
            insert_missing(dst_, layers, "");
            ++counts_.runs;
        }
    }

    /// The task runs with their samples. A task run the destination has may still lack samples (a shard ran more
    /// lengths or depths of it): its samples are merged either way, each kept where it is already stored.
    void merge_task_runs() {
        for (TaskRunRecord r : rows_.task_runs) {
            if (!selected(r.key)) continue;
            const std::int64_t source_id = r.id;
            if (exists_by_key(dst_, TaskRunRecord::table, "key", r.key)) {
                ++counts_.skipped;
            } else {
                r.model_id = dest_model(r.model_id);
                if (r.text_id) r.text_id = dest_text(*r.text_id);
                if (r.schedule_id) r.schedule_id = schedule_id_.at(*r.schedule_id);
                insert_record(dst_, r);
                ++counts_.task_runs;
            }
            merge_task_samples(source_id, id_by_key(dst_, TaskRunRecord::table, "key", r.key));
        }
    }

    /// The kernel benchmarks. They have no key: a row equal in every value is the same measurement.
    void merge_kernel_bench() {
        SQLite::Statement same(dst_,
                               "SELECT 1 FROM kernel_bench WHERE name = ? AND shape_json = ? AND threads = ? AND "
                               "time_ms = ? AND git_commit = ? AND machine = ? AND created_at = ?");
        for (const KernelBenchRecord& b : select_records<KernelBenchRecord>(src_, "ORDER BY id")) {
            same.reset();
            same.bind(1, b.name);
            same.bind(2, b.shape_json);
            same.bind(3, b.threads);
            same.bind(4, b.time_ms);
            same.bind(5, b.git_commit);
            same.bind(6, b.machine);
            same.bind(7, b.created_at);
            if (same.executeStep()) continue;
            insert_record(dst_, b);
            ++counts_.kernel_bench;
        }
    }

    /// The sweeps, their jobs, the job failures and the Slurm arrays (schema version 2 on).
    void merge_sweep_records() {
        counts_.sweeps = insert_missing(dst_, select_records<SweepRecord>(src_, "ORDER BY created_at, key"),
                                        " ON CONFLICT(key) DO NOTHING");
        insert_missing(dst_, select_records<SweepJobRecord>(src_, "ORDER BY sweep_key, job_index"),
                       " ON CONFLICT(sweep_key, job_index) DO NOTHING");
        counts_.job_failures =
            insert_missing(dst_, select_records<JobFailureRecord>(src_, "ORDER BY id"), " ON CONFLICT DO NOTHING");
        counts_.slurm_arrays = insert_missing(dst_, select_records<SlurmArrayRecord>(src_, "ORDER BY job_id"),
                                              " ON CONFLICT(job_id) DO NOTHING");
    }

  private:
    bool selected(const std::string& key) const { return wanted_ == nullptr || wanted_->count(key) > 0; }

    /// The destination id of a source model, inserting the model where the destination lacks it.
    std::int64_t dest_model(std::int64_t id) {
        auto it = model_id_.find(id);
        if (it != model_id_.end()) return it->second;
        const auto m = std::find_if(rows_.models.begin(), rows_.models.end(), [&](auto& r) { return r.id == id; });
        KASCADE_ASSERT(m != rows_.models.end());
        insert_record(dst_, *m, " ON CONFLICT(hash) DO NOTHING");
        return model_id_[id] = id_by_key(dst_, ModelRecord::table, "hash", m->hash);
    }

    /// The destination id of a source text, inserting the text where the destination lacks it.
    std::int64_t dest_text(std::int64_t id) {
        auto it = text_id_.find(id);
        if (it != text_id_.end()) return it->second;
        const auto t = std::find_if(rows_.texts.begin(), rows_.texts.end(), [&](auto& r) { return r.id == id; });
        KASCADE_ASSERT(t != rows_.texts.end());
        insert_record(dst_, *t, " ON CONFLICT(hash) DO NOTHING");
        return text_id_[id] = id_by_key(dst_, TextRecord::table, "hash", t->hash);
    }

    /// The task and dataset samples of source task run `source_id` into destination task run `id`, each
    /// (length, depth, index) or dataset sample index kept where it is already stored.
    void merge_task_samples(std::int64_t source_id, std::int64_t id) {
        std::vector<TaskSampleRecord> samples = select_records<TaskSampleRecord>(
            src_, "WHERE task_run_id = ? ORDER BY length, depth_pct, sample_index", source_id);
        for (TaskSampleRecord& sample : samples) sample.task_run_id = id;
        counts_.task_samples +=
            insert_missing(dst_, samples, " ON CONFLICT(task_run_id, length, depth_pct, sample_index) DO NOTHING");
        std::vector<DatasetSampleRecord> dataset_samples =
            select_records<DatasetSampleRecord>(src_, "WHERE task_run_id = ? ORDER BY sample_index", source_id);
        for (DatasetSampleRecord& sample : dataset_samples) sample.task_run_id = id;
        counts_.task_samples +=
            insert_missing(dst_, dataset_samples, " ON CONFLICT(task_run_id, sample_index) DO NOTHING");
    }

    SQLite::Database& src_;
    SQLite::Database& dst_;
    const SourceRows& rows_;
    const std::set<std::string>* wanted_;
    MergeCounts& counts_;
    std::map<std::int64_t, std::int64_t> model_id_, text_id_, schedule_id_;  // source id -> dest id
};

}  // namespace

std::vector<std::string> check_merge_files(ResultsDb& source, const fs::path& dest_dir, ResultsDb* dest,
                                           std::set<std::string>& taken, const std::set<std::string>* keys) {
    const std::string what = fmt::format("checking the files of {}", source.db_file().string());
    KASCADE_CHECK(source.schema_version() >= 1, "{}: {} holds no results yet", what, source.db_file().string());
    const SourceRows rows =
        guarded(source.db_file(), what, [&] { return read_source(source.database(), source.db_file()); });
    const std::vector<ArtifactRecord> artifacts = selected_artifacts(rows, keys);
    SQLite::Database* dst = dest != nullptr ? &dest->database() : nullptr;
    return guarded(dest != nullptr ? dest->db_file() : dest_dir / ResultsDb::kFileName, what,
                   [&] { return plan_files(artifacts, source.results_dir(), dest_dir, dst, taken); })
        .problems;
}

MergeCounts merge_results(ResultsDb& source, ResultsDb& dest, const std::set<std::string>* keys) {
    const std::string what = fmt::format("merging {} into {}", source.db_file().string(), dest.db_file().string());
    KASCADE_CHECK(source.schema_version() >= 1, "{}: {} holds no results yet", what, source.db_file().string());
    SQLite::Database& src = source.database();
    SQLite::Database& dst = dest.database();
    const SourceRows rows = guarded(source.db_file(), what, [&] { return read_source(src, source.db_file()); });
    std::set<std::string> wanted;
    if (keys != nullptr) wanted = close_over_inputs(rows, *keys);

    MergeCounts counts;
    // Files first, each verified: a row is only ever written once its verified file is in place.
    const std::vector<ArtifactRecord> artifacts = selected_artifacts(rows, keys);
    std::set<std::string> taken;
    const FilePlan plan = guarded(dest.db_file(), what, [&] {
        return plan_files(artifacts, source.results_dir(), dest.results_dir(), &dst, taken);
    });
    KASCADE_CHECK(plan.problems.empty(), "{}: {} artifact file{} cannot be taken, nothing was merged: {}", what,
                  plan.problems.size(), plan.problems.size() == 1 ? "" : "s", fmt::join(plan.problems, "; "));
    CopiedFiles copied;
    counts.files = copy_artifact_files(source, dest, artifacts, plan, what, copied);

    guarded(dest.db_file(), what, [&] {
        SQLite::Transaction tx(dst, SQLite::TransactionBehavior::IMMEDIATE);
        RowMerge merge(src, dst, rows, keys != nullptr ? &wanted : nullptr, counts);
        if (keys == nullptr) merge.merge_models_and_texts();
        merge.merge_artifacts(artifacts, plan);
        merge.merge_schedules();
        merge.merge_runs();
        merge.merge_task_runs();
        if (keys == nullptr) {
            merge.merge_kernel_bench();
            if (source.schema_version() >= 2) merge.merge_sweep_records();
        }
        tx.commit();
    });
    copied.keep();
    return counts;
}

ShardsMerge merge_shards(const std::vector<fs::path>& shards, const fs::path& into_dir) {
    // Every shard is opened (and its schema checked) and every file it would add verified before anything is written.
    std::vector<std::unique_ptr<ResultsDb>> sources;
    for (const fs::path& shard : shards) {
        std::error_code ec;
        KASCADE_CHECK(fs::is_regular_file(shard / ResultsDb::kFileName, ec),
                      "shard \"{}\" has no {}: not a results folder", shard.string(), ResultsDb::kFileName);
        sources.push_back(std::make_unique<ResultsDb>(shard, DbAccess::ReadOnly));
    }
    const fs::path db_file = into_dir / ResultsDb::kFileName;
    std::error_code ec;
    const bool had_dir = fs::exists(into_dir, ec), had_db = fs::exists(db_file, ec);
    ShardsMerge out;
    {
        std::unique_ptr<ResultsDb> existing;
        if (had_db) existing = std::make_unique<ResultsDb>(into_dir, DbAccess::ReadOnly);
        std::set<std::string> taken;
        for (const auto& source : sources) {
            std::vector<std::string> problems = check_merge_files(*source, into_dir, existing.get(), taken);
            out.problems.insert(out.problems.end(), problems.begin(), problems.end());
        }
    }
    if (!out.problems.empty()) return out;

    std::unique_ptr<ResultsDb> into;
    try {
        into = std::make_unique<ResultsDb>(into_dir);
        for (const auto& source : sources) out.counts.push_back(merge_results(*source, *into));
    } catch (...) {
        // What this call created goes again while it holds nothing (another process may have started using it).
        bool empty = false;
        try {
            empty = into == nullptr || !into->has_rows();
        } catch (const std::exception&) {
        }
        into.reset();
        if (!had_db && empty) {
            for (const char* suffix : {"", "-wal", "-shm"})
                fs::remove(into_dir / (std::string(ResultsDb::kFileName) + suffix), ec);
        }
        if (!had_dir) {
            for (const char* stage : {"capture", "similarity", "schedule"})
                fs::remove(into_dir / "artifacts" / stage, ec);
            fs::remove(into_dir / "artifacts", ec);
            fs::remove(into_dir, ec);
        }
        throw;
    }
    return out;
}

}  // namespace kascade
