// io/store/results_db.cpp: the SQLite results store (see results_db.h).
#include "io/store/results_db.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include <SQLiteCpp/Backup.h>
#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/chrono.h>
#include <sqlite3.h>

#include "base/error.h"
#include "base/modes.h"
#include "io/file_util.h"
#include "io/store/record_sql.h"
#include "io/store/schema.h"

namespace kascade {

namespace {

namespace fs = std::filesystem;
using namespace store_sql;

}  // namespace

std::string utc_now() {
    // Through std::tm and gmtime: fmt before 10 formats a system_clock time_point in local time.
    return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                       fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

ResultsDb::ResultsDb(const fs::path& results_dir, DbAccess access)
    : results_dir_(results_dir), access_(access), db_file_(results_dir / kFileName) {
    if (access_ == DbAccess::ReadOnly) {
        KASCADE_CHECK(fs::exists(db_file_),
                      "no results database at \"{}\" (run a stage or a sweep first, or pass --results DIR)",
                      db_file_.string());
        check_regular_file(db_file_);  // SQLite would wait forever on a FIFO
        guarded(db_file_, "cannot open the results database",
                [&] { db_ = std::make_unique<SQLite::Database>(db_file_, SQLite::OPEN_READONLY, kBusyTimeoutMs); });
        const int version = schema_version();
        check_not_newer(version);
        guarded(db_file_, "reading the schema", [&] { check_is_kascade(); });
        if (version > 0 && version < kSchemaVersion) {
            // A database of an older kascade: read a copy in memory migrated forward, so every reader sees the
            // current columns while the file stays as it is (it is migrated by the next command that writes).
            guarded(db_file_, "reading an older schema", [&] {
                auto copy = std::make_unique<SQLite::Database>(":memory:", SQLite::OPEN_READWRITE);
                SQLite::Backup(*copy, *db_).executeStep();
                db_ = std::move(copy);
            });
            migrate();
        }
        return;
    }
    std::error_code ec;
    fs::create_directories(results_dir_, ec);
    KASCADE_CHECK(!ec, "cannot create results directory \"{}\": {}", results_dir_.string(), ec.message());
    // SQLite would only say "unable to open database file"; check ourselves to give the OS reason.
    KASCADE_CHECK(::access(results_dir_.c_str(), W_OK | X_OK) == 0, "results directory \"{}\" is not writable: {}",
                  results_dir_.string(), std::strerror(errno));
    if (fs::exists(db_file_, ec)) check_regular_file(db_file_);
    guarded(db_file_, "cannot open the results database", [&] {
        db_ =
            std::make_unique<SQLite::Database>(db_file_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs);
        db_->exec("PRAGMA foreign_keys = ON");
        // Before WAL mode, which would already change another program's file.
        check_not_newer(db_->execAndGet("PRAGMA user_version").getInt());
        check_is_kascade();
    });
    use_wal();
    guarded(db_file_, "cannot open the results database", [&] {
        // In WAL mode NORMAL never corrupts the database; a power loss may only drop the last transactions.
        db_->exec("PRAGMA synchronous = NORMAL");
    });
    migrate();
}

ResultsDb::~ResultsDb() = default;

int ResultsDb::schema_version() {
    return guarded(db_file_, "reading user_version", [&] { return db_->execAndGet("PRAGMA user_version").getInt(); });
}

bool ResultsDb::has_rows() {
    return guarded(db_file_, "counting rows", [&] {
        std::vector<std::string> tables;
        SQLite::Statement st(*db_, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
        while (st.executeStep()) tables.push_back(st.getColumn(0).getString());
        for (const std::string& table : tables) {
            if (db_->execAndGet(fmt::format("SELECT EXISTS (SELECT 1 FROM \"{}\")", table)).getInt() != 0) return true;
        }
        return false;
    });
}

void ResultsDb::check_not_newer(int version) const {
    KASCADE_CHECK(version <= kSchemaVersion, "{} has schema version {}, this kascade reads up to {}; upgrade kascade",
                  db_file_.string(), version, kSchemaVersion);
}

void ResultsDb::check_is_kascade() {
    // Migrations commit their tables together with the version, so tables at version 0 are not kascade's. One
    // statement reads both from the same snapshot, so a database another process is creating passes.
    SQLite::Statement st(*db_,
                         "SELECT (SELECT user_version FROM pragma_user_version), "
                         "(SELECT coalesce(group_concat(name, ', '), '') FROM sqlite_master WHERE type = 'table')");
    KASCADE_ASSERT(st.executeStep());
    const std::string tables = st.getColumn(1).getString();
    KASCADE_CHECK(st.getColumn(0).getInt() != 0 || tables.empty(),
                  "{} is not a kascade results database: it has tables of its own ({}) and no kascade schema "
                  "version; move it away or choose another --results folder",
                  db_file_.string(), tables);
}

void ResultsDb::use_wal() {
    // Switching a new database to WAL needs an exclusive lock, which SQLite may refuse with SQLITE_BUSY without
    // waiting while another process is creating the same database; WAL is persistent, so the switch is retried
    // until this or another process has made it, for as long as a writer waits for a lock.
    constexpr int kRetryMs = 20;
    for (int waited = 0;; waited += kRetryMs) {
        try {
            if (db_->execAndGet("PRAGMA journal_mode = WAL").getString() == "wal") return;
        } catch (const SQLite::Exception& e) {
            const int code = e.getErrorCode() & 0xff;
            if (code != SQLITE_BUSY && code != SQLITE_LOCKED)
                KASCADE_FAIL("{}: cannot turn on WAL mode: {}", db_file_.string(), e.what());
        }
        KASCADE_CHECK(waited < kBusyTimeoutMs,
                      "{}: cannot turn on WAL mode (the file system may not support the shared memory and locks "
                      "SQLite needs; use kascade sweep --shard-dir on a local folder)",
                      db_file_.string());
        std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
    }
}

void ResultsDb::migrate() {
    int version = schema_version();
    check_not_newer(version);
    if (version == kSchemaVersion) return;
    // A migration may rebuild a table (drop it and rename a copy); with foreign keys on, dropping it would delete
    // the rows that reference it. The pragma is a no-op inside a transaction, so it is switched around it, and the
    // keys are checked before the migration commits.
    db_->exec("PRAGMA foreign_keys = OFF");
    guarded(db_file_, "migrating the schema", [&] {
        // EXCLUSIVE takes the write lock first and the version is read again under it, so processes opening a
        // fresh or an old database together migrate it exactly once; the others find it done.
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::EXCLUSIVE);
        version = db_->execAndGet("PRAGMA user_version").getInt();
        check_not_newer(version);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= version) continue;
            db_->exec(m.sql);
            db_->exec(fmt::format("PRAGMA user_version = {}", m.version));
        }
        db_->exec(flat_views_sql());
        SQLite::Statement violations(*db_, "PRAGMA foreign_key_check");
        KASCADE_CHECK(!violations.executeStep(), "{}: migrating to schema version {} broke a foreign key in table {}",
                      db_file_.string(), kSchemaVersion, violations.getColumn(0).getString());
        tx.commit();
    });
    db_->exec("PRAGMA foreign_keys = ON");
}

// ---- Models and texts ----

std::int64_t ResultsDb::upsert_model(const ModelRecord& model) {
    return guarded(db_file_, fmt::format("storing model {}", model.path), [&] {
        insert_record(*db_, with_created_at(model), " ON CONFLICT(hash) DO NOTHING");
        return id_by_hash(*db_, ModelRecord::table, model.hash);
    });
}

std::int64_t ResultsDb::upsert_text(const TextRecord& text) {
    return guarded(db_file_, fmt::format("storing text {}", text.path), [&] {
        insert_record(*db_, with_created_at(text), " ON CONFLICT(hash) DO NOTHING");
        return id_by_hash(*db_, TextRecord::table, text.hash);
    });
}

std::optional<ModelRecord> ResultsDb::find_model(std::int64_t id) {
    return guarded(db_file_, "reading models", [&] { return select_one<ModelRecord>(*db_, "WHERE id = ?", id); });
}

std::optional<TextRecord> ResultsDb::find_text(std::int64_t id) {
    return guarded(db_file_, "reading texts", [&] { return select_one<TextRecord>(*db_, "WHERE id = ?", id); });
}

// ---- Artifacts ----

namespace {

template <class Detail>
void insert_artifact_rows(SQLite::Database& db, const fs::path& db_file, const ArtifactRecord& artifact,
                          std::string_view stage, const Detail* detail) {
    KASCADE_CHECK(artifact.stage == stage, "{}: artifact {} has stage '{}' but was stored as a {} artifact",
                  db_file.string(), artifact.key, artifact.stage, stage);
    guarded(db_file, fmt::format("storing {} artifact {}", artifact.stage, artifact.key), [&] {
        SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
        insert_record(db, with_created_at(artifact), upsert_suffix<ArtifactRecord>("key"));
        if (detail != nullptr) {
            KASCADE_CHECK(detail->artifact_key == artifact.key, "{}: {} detail row has artifact_key {}, expected {}",
                          db_file.string(), stage, detail->artifact_key, artifact.key);
            insert_record(db, *detail, upsert_suffix<Detail>("artifact_key"));
        }
        tx.commit();
    });
}

}  // namespace

void ResultsDb::insert_artifact(const ArtifactRecord& artifact) {
    insert_artifact_rows<CaptureRecord>(*db_, db_file_, artifact, "schedule", nullptr);
}

void ResultsDb::insert_artifact(const ArtifactRecord& artifact, const CaptureRecord& capture) {
    insert_artifact_rows(*db_, db_file_, artifact, "capture", &capture);
}

void ResultsDb::insert_artifact(const ArtifactRecord& artifact, const SimilarityRecord& similarity) {
    insert_artifact_rows(*db_, db_file_, artifact, "similarity", &similarity);
}

std::optional<ArtifactRecord> ResultsDb::find_artifact(std::string_view key) {
    return guarded(db_file_, "reading artifacts",
                   [&] { return select_one<ArtifactRecord>(*db_, "WHERE key = ?", std::string(key)); });
}

std::optional<CaptureRecord> ResultsDb::find_capture(std::string_view artifact_key) {
    return guarded(db_file_, "reading captures", [&] {
        return select_one<CaptureRecord>(*db_, "WHERE artifact_key = ?", std::string(artifact_key));
    });
}

std::optional<SimilarityRecord> ResultsDb::find_similarity(std::string_view artifact_key) {
    return guarded(db_file_, "reading similarities", [&] {
        return select_one<SimilarityRecord>(*db_, "WHERE artifact_key = ?", std::string(artifact_key));
    });
}

bool ResultsDb::record_artifact_checksum(std::string_view key, const std::string& checksum) {
    return guarded(db_file_, fmt::format("recording the checksum of artifact {}", key), [&] {
        SQLite::Statement st(*db_, "UPDATE artifacts SET checksum = ? WHERE key = ? AND checksum IS NULL");
        st.bind(1, checksum);
        st.bind(2, std::string(key));
        return st.exec() > 0;
    });
}

std::vector<ArtifactRecord> ResultsDb::list_artifacts(std::string_view stage) {
    return guarded(db_file_, "reading artifacts", [&] {
        if (stage.empty()) return select_records<ArtifactRecord>(*db_, "ORDER BY created_at, key");
        return select_records<ArtifactRecord>(*db_, "WHERE stage = ? ORDER BY created_at, key", std::string(stage));
    });
}

// ---- Schedules ----

std::int64_t ResultsDb::insert_schedule(const ScheduleRecord& schedule,
                                        const std::vector<ScheduleLayerRecord>& layers) {
    const std::string what = fmt::format("schedule {}", schedule.key);
    KASCADE_CHECK(!layers.empty(), "{}: {} has no layers", db_file_.string(), what);
    ScheduleRecord record = with_created_at(schedule);
    record.n_layers = static_cast<std::int64_t>(layers.size());
    record.n_anchor_layers = 0;
    record.n_reuse_layers = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const ScheduleLayerRecord& l = layers[i];
        KASCADE_CHECK(l.layer == static_cast<std::int64_t>(i), "{}: {} lists layer {} at position {}, expected {}",
                      db_file_.string(), what, l.layer, i, i);
        const std::string where = fmt::format("{}: {} layer {} role", db_file_.string(), what, i);
        if (parse_mode<LayerRole>(l.role, where) != LayerRole::Reuse) {
            KASCADE_CHECK(!l.anchor_layer,
                          "{}: {} layer {} has role '{}' and an anchor_layer (only reuse layers have one)",
                          db_file_.string(), what, i, l.role);
            ++record.n_anchor_layers;
            continue;
        }
        ++record.n_reuse_layers;
        KASCADE_CHECK(l.anchor_layer && *l.anchor_layer >= 0 && *l.anchor_layer < l.layer,
                      "{}: {} reuse layer {} needs an anchor_layer in [0, {})", db_file_.string(), what, i, i);
        const std::string& anchor_role = layers[static_cast<std::size_t>(*l.anchor_layer)].role;
        KASCADE_CHECK(parse_mode<LayerRole>(anchor_role, where) != LayerRole::Reuse,
                      "{}: {} layer {} reuses layer {}, which is itself a reuse layer", db_file_.string(), what, i,
                      *l.anchor_layer);
    }
    return guarded(db_file_, "storing " + what, [&] {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        insert_record(*db_, record, " ON CONFLICT(key) DO NOTHING");
        if (db_->getChanges() == 0) {
            // Same key => same inputs and parameters => the stored schedule is this one.
            SQLite::Statement st(*db_, "SELECT id FROM schedules WHERE key = ?");
            st.bind(1, record.key);
            KASCADE_ASSERT(st.executeStep());
            return st.getColumn(0).getInt64();
        }
        const std::int64_t id = db_->getLastInsertRowid();
        SQLite::Statement st(*db_, insert_sql<ScheduleLayerRecord>());
        for (ScheduleLayerRecord layer : layers) {
            layer.schedule_id = id;
            st.reset();
            bind_record(st, layer);
            st.exec();
        }
        tx.commit();
        return id;
    });
}

namespace {

std::optional<Schedule> load_schedule_where(SQLite::Database& db, std::string_view where, const auto& arg) {
    std::optional<ScheduleRecord> record = select_one<ScheduleRecord>(db, where, arg);
    if (!record) return std::nullopt;
    Schedule s{*record, select_records<ScheduleLayerRecord>(db, "WHERE schedule_id = ? ORDER BY layer", record->id)};
    return s;
}

}  // namespace

std::optional<Schedule> ResultsDb::find_schedule(std::string_view key) {
    return guarded(db_file_, "reading schedules",
                   [&] { return load_schedule_where(*db_, "WHERE key = ?", std::string(key)); });
}

std::optional<Schedule> ResultsDb::load_schedule(std::int64_t id) {
    return guarded(db_file_, "reading schedules", [&] { return load_schedule_where(*db_, "WHERE id = ?", id); });
}

std::vector<ScheduleRecord> ResultsDb::list_schedules() {
    return guarded(db_file_, "reading schedules", [&] { return select_records<ScheduleRecord>(*db_, "ORDER BY id"); });
}

// ---- Runs ----

std::optional<std::int64_t> ResultsDb::find_run(std::string_view key) {
    return guarded(db_file_, "reading runs", [&]() -> std::optional<std::int64_t> {
        SQLite::Statement st(*db_, "SELECT id FROM runs WHERE key = ?");
        st.bind(1, std::string(key));
        if (!st.executeStep()) return std::nullopt;
        return st.getColumn(0).getInt64();
    });
}

StoredRow ResultsDb::insert_run(const RunRecord& run, const RunMetrics& metrics,
                                const std::vector<RunLayerRecord>& layers, bool replace) {
    return guarded(db_file_, fmt::format("storing run {}", run.key), [&]() -> StoredRow {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        if (replace) {
            SQLite::Statement del(*db_, "DELETE FROM runs WHERE key = ?");  // metrics and layers cascade
            del.bind(1, run.key);
            del.exec();
        }
        insert_record(*db_, run, " ON CONFLICT(key) DO NOTHING");
        if (db_->getChanges() == 0) {
            // Same key => same inputs and parameters: the run another process stored is this one.
            SQLite::Statement existing(*db_, "SELECT id FROM runs WHERE key = ?");
            existing.bind(1, run.key);
            KASCADE_ASSERT(existing.executeStep());
            return {existing.getColumn(0).getInt64(), false};
        }
        const std::int64_t id = db_->getLastInsertRowid();
        RunMetrics m = metrics;
        m.run_id = id;
        insert_record(*db_, m);
        SQLite::Statement st(*db_, insert_sql<RunLayerRecord>());
        for (RunLayerRecord layer : layers) {
            layer.run_id = id;
            st.reset();
            bind_record(st, layer);
            st.exec();
        }
        tx.commit();
        return {id, true};
    });
}

StoredRow ResultsDb::insert_task_run(const TaskRunRecord& run) {
    return guarded(db_file_, fmt::format("storing task run {}", run.key), [&]() -> StoredRow {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        TaskRunRecord r = run;
        if (r.created_at.empty()) r.created_at = utc_now();
        insert_record(*db_, r, " ON CONFLICT(key) DO NOTHING");
        const bool inserted = db_->getChanges() > 0;
        SQLite::Statement id(*db_, "SELECT id FROM task_runs WHERE key = ?");
        id.bind(1, run.key);
        KASCADE_ASSERT(id.executeStep());
        const std::int64_t run_id = id.getColumn(0).getInt64();
        tx.commit();
        return {run_id, inserted};
    });
}

std::optional<TaskRunRecord> ResultsDb::find_task_run(std::string_view key) {
    return guarded(db_file_, "reading task runs",
                   [&] { return select_one<TaskRunRecord>(*db_, "WHERE key = ?", std::string(key)); });
}

std::vector<TaskRunRecord> ResultsDb::list_task_runs() {
    return guarded(db_file_, "reading task runs", [&] { return select_records<TaskRunRecord>(*db_, "ORDER BY id"); });
}

bool ResultsDb::insert_task_sample(const TaskSampleRecord& sample, bool replace) {
    return guarded(db_file_, fmt::format("storing a sample of task run {}", sample.task_run_id), [&] {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        constexpr std::string_view kSampleId = "task_run_id, length, depth_pct, sample_index";
        insert_record(*db_, sample,
                      replace ? upsert_suffix<TaskSampleRecord>(kSampleId)
                              : fmt::format(" ON CONFLICT({}) DO NOTHING", kSampleId));
        const bool inserted = db_->getChanges() > 0;
        tx.commit();
        return inserted;
    });
}

std::vector<TaskSampleRecord> ResultsDb::list_task_samples(std::int64_t task_run_id) {
    return guarded(db_file_, "reading task samples", [&] {
        return select_records<TaskSampleRecord>(*db_, "WHERE task_run_id = ? ORDER BY length, depth_pct, sample_index",
                                                task_run_id);
    });
}

bool ResultsDb::insert_dataset_sample(const DatasetSampleRecord& sample, bool replace) {
    return guarded(db_file_, fmt::format("storing a sample of task run {}", sample.task_run_id), [&] {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        constexpr std::string_view kSampleId = "task_run_id, sample_index";
        insert_record(*db_, sample,
                      replace ? upsert_suffix<DatasetSampleRecord>(kSampleId)
                              : fmt::format(" ON CONFLICT({}) DO NOTHING", kSampleId));
        const bool inserted = db_->getChanges() > 0;
        tx.commit();
        return inserted;
    });
}

std::vector<DatasetSampleRecord> ResultsDb::list_dataset_samples(std::int64_t task_run_id) {
    return guarded(db_file_, "reading dataset samples", [&] {
        return select_records<DatasetSampleRecord>(*db_, "WHERE task_run_id = ? ORDER BY sample_index", task_run_id);
    });
}

RunDetails ResultsDb::load_run(std::int64_t id) {
    return guarded(db_file_, fmt::format("reading run {}", id), [&] {
        std::optional<RunRecord> run = select_one<RunRecord>(*db_, "WHERE id = ?", id);
        KASCADE_CHECK(run.has_value(), "{}: there is no run with id {}", db_file_.string(), id);
        std::optional<RunMetrics> metrics = select_one<RunMetrics>(*db_, "WHERE run_id = ?", id);
        KASCADE_CHECK(metrics.has_value(), "{}: run {} has no run_metrics row", db_file_.string(), id);
        RunDetails details{*run, *metrics, select_records<RunLayerRecord>(*db_, "WHERE run_id = ? ORDER BY layer", id),
                           std::nullopt};
        if (run->schedule_id) details.schedule = load_schedule_where(*db_, "WHERE id = ?", *run->schedule_id);
        return details;
    });
}

std::vector<RunRecord> ResultsDb::list_runs() {
    return guarded(db_file_, "reading runs", [&] { return select_records<RunRecord>(*db_, "ORDER BY id"); });
}

std::int64_t ResultsDb::insert_kernel_bench(const KernelBenchRecord& bench) {
    return guarded(db_file_, fmt::format("storing kernel benchmark {}", bench.name), [&] {
        insert_record(*db_, with_created_at(bench));
        return db_->getLastInsertRowid();
    });
}

// ---- Sweeps ----

void ResultsDb::record_sweep(const SweepRecord& sweep, const std::vector<SweepJobRecord>& jobs) {
    guarded(db_file_, fmt::format("storing sweep {}", sweep.key), [&] {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        insert_record(*db_, with_created_at(sweep), " ON CONFLICT(key) DO NOTHING");
        SQLite::Statement st(*db_, insert_sql<SweepJobRecord>(" ON CONFLICT(sweep_key, job_index) DO NOTHING"));
        for (const SweepJobRecord& job : jobs) {
            KASCADE_ASSERT(job.sweep_key == sweep.key);
            st.reset();
            bind_record(st, job);
            st.exec();
        }
        tx.commit();
    });
}

std::vector<SweepRecord> ResultsDb::list_sweeps() {
    return guarded(db_file_, "reading sweeps",
                   [&] { return select_records<SweepRecord>(*db_, "ORDER BY created_at, key"); });
}

std::vector<SweepJobRecord> ResultsDb::list_sweep_jobs(std::string_view sweep_key) {
    return guarded(db_file_, "reading sweep_jobs", [&] {
        return select_records<SweepJobRecord>(*db_, "WHERE sweep_key = ? ORDER BY job_index", std::string(sweep_key));
    });
}

void ResultsDb::record_job_failure(const JobFailureRecord& failure) {
    guarded(db_file_, fmt::format("storing the failure of job {}", failure.job_index),
            [&] { insert_record(*db_, failure, " ON CONFLICT DO NOTHING"); });
}

std::vector<JobFailureRecord> ResultsDb::list_job_failures(std::string_view sweep_key) {
    return guarded(db_file_, "reading job_failures", [&] {
        return select_records<JobFailureRecord>(*db_, "WHERE sweep_key = ? ORDER BY id", std::string(sweep_key));
    });
}

void ResultsDb::record_slurm_array(const SlurmArrayRecord& array) {
    guarded(db_file_, fmt::format("storing Slurm job {}", array.job_id),
            [&] { insert_record(*db_, array, " ON CONFLICT(job_id) DO NOTHING"); });
}

std::vector<SlurmArrayRecord> ResultsDb::list_slurm_arrays(std::string_view sweep_key) {
    return guarded(db_file_, "reading slurm_arrays", [&] {
        return select_records<SlurmArrayRecord>(*db_, "WHERE sweep_key = ? ORDER BY submitted_at, job_id",
                                                std::string(sweep_key));
    });
}

}  // namespace kascade
