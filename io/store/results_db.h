// io/store/results_db.h: the SQLite results store, <results_dir>/kascade.db (layout: results/README.md).
//
// Opening creates the folder and the file if needed, turns on WAL mode, foreign keys and a busy timeout (so that
// concurrent processes wait for each other instead of failing), and applies the forward migrations of schema.h in
// one exclusive transaction that re-reads the version first, so any number of processes may open a fresh or an
// old database at once. Every multi-row write (an artifact with its detail row, a schedule with its layers, a run
// with its metrics and layers) is one BEGIN IMMEDIATE transaction: a crash never leaves half of it behind. Rows
// with a content key are inserted with ON CONFLICT DO NOTHING, so a row another process stored first is a cache
// hit, never an error or a duplicate.
//
// All failures (unwritable folder, a database from a newer kascade, constraint violations) throw kascade::Error
// naming the database file and what was being written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/store/records.h"

namespace SQLite {
class Database;
}

namespace kascade {

/// A schedule with its per-layer rows (layers ordered by layer index).
struct Schedule {
    ScheduleRecord record;
    std::vector<ScheduleLayerRecord> layers;
};

/// Everything stored about one run.
struct RunDetails {
    RunRecord run;
    RunMetrics metrics;
    std::vector<RunLayerRecord> layers;  ///< ordered by layer index
    std::optional<Schedule> schedule;    ///< set for method "kascade"
};

/// How a ResultsDb is opened.
enum class DbAccess {
    ReadWrite,  ///< create the folder and database if needed and migrate them
    ReadOnly,   ///< an existing database as it is: no file is created or changed (dry runs, merge sources)
};

/// The id of a row with a content key, and whether this call inserted it (false: it was stored already).
struct StoredRow {
    std::int64_t id = 0;
    bool inserted = false;
};

/// The current time as UTC ISO-8601 with seconds, e.g. "2026-01-31T12:34:56Z" (the format of every *_at column).
std::string utc_now();

class ResultsDb {
  public:
    static constexpr std::string_view kFileName = "kascade.db";
    /// How long a connection waits for another process's lock before failing (concurrent sweep processes serialise
    /// their short write transactions); QueryDb's read-only connections wait as long.
    static constexpr int kBusyTimeoutMs = 60'000;

    /// Opens <results_dir>/kascade.db, creating the folder and the database, and migrates it to kSchemaVersion.
    /// Throws kascade::Error if the folder cannot be created or written (naming it and the OS reason), or if the
    /// database was made by a newer kascade. ReadOnly: the database must exist; it is neither created nor
    /// changed: an older schema is read through an in-memory copy migrated forward, and schema_version() is 0 for a
    /// database still being created.
    explicit ResultsDb(const std::filesystem::path& results_dir, DbAccess access = DbAccess::ReadWrite);
    ~ResultsDb();
    ResultsDb(const ResultsDb&) = delete;
    ResultsDb& operator=(const ResultsDb&) = delete;

    const std::filesystem::path& results_dir() const { return results_dir_; }
    const std::filesystem::path& db_file() const { return db_file_; }
    /// PRAGMA user_version (== kSchemaVersion after a ReadWrite open).
    int schema_version();
    DbAccess access() const { return access_; }
    /// Whether any table holds a row (false for a database that has only its schema).
    bool has_rows();

    // Models and texts: inserted once per content hash; returns the id of the (possibly existing) row.
    std::int64_t upsert_model(const ModelRecord& model);
    std::int64_t upsert_text(const TextRecord& text);
    std::optional<ModelRecord> find_model(std::int64_t id);
    std::optional<TextRecord> find_text(std::int64_t id);

    // Artifacts: the content-addressed cache index. Call only after the file is complete and renamed in place.
    // Inserting a key that exists replaces the row (a --force recompute); the detail row goes in the same
    // transaction. artifact.stage must match the detail record: "capture", "similarity", or "schedule" (no detail).
    void insert_artifact(const ArtifactRecord& artifact);
    void insert_artifact(const ArtifactRecord& artifact, const CaptureRecord& capture);
    void insert_artifact(const ArtifactRecord& artifact, const SimilarityRecord& similarity);
    std::optional<ArtifactRecord> find_artifact(std::string_view key);
    std::optional<CaptureRecord> find_capture(std::string_view artifact_key);
    std::optional<SimilarityRecord> find_similarity(std::string_view artifact_key);
    /// All artifacts, optionally of one stage, oldest first.
    std::vector<ArtifactRecord> list_artifacts(std::string_view stage = {});
    /// Records the checksum of an artifact stored without one (schema version < 5), once its file was verified by
    /// other means; a row that has a checksum keeps it. Returns whether the row changed.
    bool record_artifact_checksum(std::string_view key, const std::string& checksum);

    /// Inserts a schedule with its layers and returns its id; if a schedule with the same key exists, returns
    /// its id and writes nothing. Checks the layers (one per layer 0..n_layers-1, reuse layers point at an
    /// earlier dense/anchor layer) and sets n_layers, n_anchor_layers and n_reuse_layers from them.
    std::int64_t insert_schedule(const ScheduleRecord& schedule, const std::vector<ScheduleLayerRecord>& layers);
    std::optional<Schedule> find_schedule(std::string_view key);
    std::optional<Schedule> load_schedule(std::int64_t id);
    std::vector<ScheduleRecord> list_schedules();

    /// The id of the run with this content key, if stored (a cache hit).
    std::optional<std::int64_t> find_run(std::string_view key);
    /// Inserts a run, its metrics and its layers in one transaction. metrics.run_id and layers[i].run_id are
    /// ignored (set to the new id). If a run with the same key exists: with replace (a --force re-run) it is
    /// deleted in the same transaction; otherwise nothing is written and the stored run's id is returned with
    /// inserted = false (another process finished the same run first: a cache hit).
    StoredRow insert_run(const RunRecord& run, const RunMetrics& metrics, const std::vector<RunLayerRecord>& layers,
                         bool replace = false);
    /// The run with its metrics, layers and schedule; throws if there is no run with this id.
    RunDetails load_run(std::int64_t id);
    /// All runs, in id order.
    std::vector<RunRecord> list_runs();

    // Task runs and their samples (pipeline/stages/task_stage.h).
    /// Stores the task run unless one with its key exists (another process may have stored it): either way its id.
    StoredRow insert_task_run(const TaskRunRecord& run);
    std::optional<TaskRunRecord> find_task_run(std::string_view key);
    std::vector<TaskRunRecord> list_task_runs();
    /// Stores one sample in its own transaction; a sample of the same (run, length, depth, index) already stored
    /// (by a concurrent process of the same run) is kept, unless `replace` (a forced re-run). Returns whether this
    /// call stored it.
    bool insert_task_sample(const TaskSampleRecord& sample, bool replace = false);
    std::vector<TaskSampleRecord> list_task_samples(std::int64_t task_run_id);
    /// A sample of a dataset task run (pipeline/stages/dataset_task_stage.h), as insert_task_sample.
    bool insert_dataset_sample(const DatasetSampleRecord& sample, bool replace = false);
    std::vector<DatasetSampleRecord> list_dataset_samples(std::int64_t task_run_id);

    std::int64_t insert_kernel_bench(const KernelBenchRecord& bench);

    // Sweeps (schema version 2). A sweep and its jobs are written once per key, in one transaction; writing them
    // again (the same sweep planned by another process or machine) changes nothing.
    void record_sweep(const SweepRecord& sweep, const std::vector<SweepJobRecord>& jobs);
    std::vector<SweepRecord> list_sweeps();                                   ///< oldest first
    std::vector<SweepJobRecord> list_sweep_jobs(std::string_view sweep_key);  ///< in job_index order
    void record_job_failure(const JobFailureRecord& failure);
    std::vector<JobFailureRecord> list_job_failures(std::string_view sweep_key);  ///< oldest first
    void record_slurm_array(const SlurmArrayRecord& array);
    std::vector<SlurmArrayRecord> list_slurm_arrays(std::string_view sweep_key);  ///< oldest first

    /// The underlying connection, for queries this class does not offer.
    SQLite::Database& database() { return *db_; }

  private:
    void check_not_newer(int version) const;
    /// Refuses a database at version 0 that has tables: another program's SQLite file, not one being created.
    void check_is_kascade();
    void use_wal();
    void migrate();

    std::filesystem::path results_dir_;
    DbAccess access_;
    std::filesystem::path db_file_;
    std::unique_ptr<SQLite::Database> db_;
};

}  // namespace kascade
