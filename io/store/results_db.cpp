// io/store/results_db.cpp: the SQLite results store (see results_db.h).
#include "io/store/results_db.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/chrono.h>

#include "io/error.h"
#include "io/store/schema.h"

namespace kascade {

namespace {

namespace fs = std::filesystem;

// Concurrent sweep processes serialise their short write transactions; a writer waits this long before failing.
constexpr int kBusyTimeoutMs = 60'000;

template <class R>
constexpr bool kHasId = requires(R r) {
    r.id;
};

// ---- Binding and reading records through their field lists ----

void bind_value(SQLite::Statement& st, int index, std::int64_t v) {
    st.bind(index, v);
}
void bind_value(SQLite::Statement& st, int index, double v) {
    st.bind(index, v);
}
void bind_value(SQLite::Statement& st, int index, const std::string& v) {
    st.bind(index, v);
}
template <class T>
void bind_value(SQLite::Statement& st, int index, const std::optional<T>& v) {
    if (v) {
        bind_value(st, index, *v);
    } else {
        st.bind(index);
    }
}

void read_value(const SQLite::Column& c, std::int64_t& v) {
    v = c.getInt64();
}
void read_value(const SQLite::Column& c, double& v) {
    v = c.getDouble();
}
void read_value(const SQLite::Column& c, std::string& v) {
    v = c.getString();
}
template <class T>
void read_value(const SQLite::Column& c, std::optional<T>& v) {
    if (c.isNull()) {
        v.reset();
    } else {
        read_value(c, v.emplace());
    }
}

template <class R>
std::string column_list() {
    std::string cols;
    for (const auto& f : R::fields()) {
        if (!cols.empty()) cols += ", ";
        cols += f.name;
    }
    return cols;
}

// "INSERT INTO t (a, b) VALUES (?, ?)" followed by `suffix` (e.g. an ON CONFLICT clause).
template <class R>
std::string insert_sql(std::string_view suffix = {}) {
    std::string marks;
    for (std::size_t i = 0; i < R::fields().size(); ++i) marks += i == 0 ? "?" : ", ?";
    return fmt::format("INSERT INTO {} ({}) VALUES ({}){}", R::table, column_list<R>(), marks, suffix);
}

// " ON CONFLICT(<key>) DO UPDATE SET a = excluded.a, ...": a re-insert of the same key replaces the values in place
// (unlike INSERT OR REPLACE, which deletes the row first and so would trip foreign keys that point at it).
template <class R>
std::string upsert_suffix(std::string_view key) {
    std::string set;
    for (const auto& f : R::fields()) {
        if (f.name == key) continue;
        if (!set.empty()) set += ", ";
        set += fmt::format("{0} = excluded.{0}", f.name);
    }
    return fmt::format(" ON CONFLICT({}) DO UPDATE SET {}", key, set);
}

template <class R>
void bind_record(SQLite::Statement& st, const R& record) {
    int index = 1;
    for (const auto& f : R::fields()) {
        std::visit([&](auto member) { bind_value(st, index, record.*member); }, f.member);
        ++index;
    }
}

template <class R>
void insert_record(SQLite::Database& db, const R& record, std::string_view suffix = {}) {
    SQLite::Statement st(db, insert_sql<R>(suffix));
    bind_record(st, record);
    st.exec();
}

// Reads rows of R: "SELECT [id,] <fields> FROM <table> <tail>" with `args` bound to the tail's placeholders.
template <class R, class... Args>
std::vector<R> select_records(SQLite::Database& db, std::string_view tail, const Args&... args) {
    std::string sql = fmt::format("SELECT {}{} FROM {} {}", kHasId<R> ? "id, " : "", column_list<R>(), R::table, tail);
    SQLite::Statement st(db, sql);
    int index = 1;
    (bind_value(st, index++, args), ...);
    std::vector<R> out;
    while (st.executeStep()) {
        R record;
        int col = 0;
        if constexpr (kHasId<R>) record.id = st.getColumn(col++).getInt64();
        for (const auto& f : R::fields()) {
            std::visit([&](auto member) { read_value(st.getColumn(col), record.*member); }, f.member);
            ++col;
        }
        out.push_back(std::move(record));
    }
    return out;
}

template <class R, class... Args>
std::optional<R> select_one(SQLite::Database& db, std::string_view tail, const Args&... args) {
    std::vector<R> rows = select_records<R>(db, tail, args...);
    if (rows.empty()) return std::nullopt;
    return std::move(rows.front());
}

template <class R>
R with_created_at(R record) {
    if (record.created_at.empty()) record.created_at = utc_now();
    return record;
}

// Runs `body`, turning SQLite's exceptions into kascade::Error naming the database and what was being done.
template <class F>
auto guarded(const fs::path& db_file, std::string_view what, F&& body) {
    try {
        return body();
    } catch (const SQLite::Exception& e) {
        KASCADE_FAIL("{}: {}: {}", db_file.string(), what, e.what());
    }
}

std::int64_t id_by_hash(SQLite::Database& db, std::string_view table, const std::string& hash) {
    SQLite::Statement st(db, fmt::format("SELECT id FROM {} WHERE hash = ?", table));
    st.bind(1, hash);
    KASCADE_ASSERT(st.executeStep());
    return st.getColumn(0).getInt64();
}

}  // namespace

std::string utc_now() {
    // Through std::tm and gmtime: fmt before 10 formats a system_clock time_point in local time.
    return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                       fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

ResultsDb::ResultsDb(const fs::path& results_dir) : results_dir_(results_dir), db_file_(results_dir / kFileName) {
    std::error_code ec;
    fs::create_directories(results_dir_, ec);
    KASCADE_CHECK(!ec, "cannot create results directory \"{}\": {}", results_dir_.string(), ec.message());
    // SQLite would only say "unable to open database file"; check ourselves to give the OS reason.
    KASCADE_CHECK(::access(results_dir_.c_str(), W_OK | X_OK) == 0, "results directory \"{}\" is not writable: {}",
                  results_dir_.string(), std::strerror(errno));
    guarded(db_file_, "cannot open the results database", [&] {
        db_ =
            std::make_unique<SQLite::Database>(db_file_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs);
        db_->exec("PRAGMA journal_mode = WAL");
        db_->exec("PRAGMA foreign_keys = ON");
        // In WAL mode NORMAL never corrupts the database; a power loss may only drop the last transactions.
        db_->exec("PRAGMA synchronous = NORMAL");
    });
    migrate();
}

ResultsDb::~ResultsDb() = default;

int ResultsDb::schema_version() {
    return guarded(db_file_, "reading user_version", [&] { return db_->execAndGet("PRAGMA user_version").getInt(); });
}

void ResultsDb::migrate() {
    auto check_not_newer = [&](int version) {
        KASCADE_CHECK(version <= kSchemaVersion,
                      "{} has schema version {}, this kascade reads up to {}; upgrade kascade", db_file_.string(),
                      version, kSchemaVersion);
    };
    int version = schema_version();
    check_not_newer(version);
    if (version == kSchemaVersion) return;
    guarded(db_file_, "migrating the schema", [&] {
        // IMMEDIATE takes the write lock first, so two processes opening a fresh database migrate it once.
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        version = db_->execAndGet("PRAGMA user_version").getInt();
        check_not_newer(version);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= version) continue;
            db_->exec(m.sql);
            db_->exec(fmt::format("PRAGMA user_version = {}", m.version));
        }
        tx.commit();
    });
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
        if (l.role != "reuse") {
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
        KASCADE_CHECK(anchor_role != "reuse", "{}: {} layer {} reuses layer {}, which is itself a reuse layer",
                      db_file_.string(), what, i, *l.anchor_layer);
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

std::int64_t ResultsDb::insert_run(const RunRecord& run, const RunMetrics& metrics,
                                   const std::vector<RunLayerRecord>& layers, bool replace) {
    return guarded(db_file_, fmt::format("storing run {}", run.key), [&] {
        SQLite::Transaction tx(*db_, SQLite::TransactionBehavior::IMMEDIATE);
        SQLite::Statement existing(*db_, "SELECT id FROM runs WHERE key = ?");
        existing.bind(1, run.key);
        if (existing.executeStep()) {
            const std::int64_t old_id = existing.getColumn(0).getInt64();
            KASCADE_CHECK(replace, "{}: run {} is already stored as run {}", db_file_.string(), run.key, old_id);
            SQLite::Statement del(*db_, "DELETE FROM runs WHERE id = ?");  // metrics and layers cascade
            del.bind(1, old_id);
            del.exec();
        }
        insert_record(*db_, run);
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
        return id;
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

}  // namespace kascade
