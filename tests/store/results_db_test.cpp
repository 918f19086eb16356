// tests/store/results_db_test.cpp: the SQLite results store on real database files: migrations, constraints,
// transactions, the runs_flat view and the round trip of every record.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "io/store/results_db.h"
#include "io/store/schema.h"
#include "io/store/table_format.h"
#include "store/store_test_util.h"

namespace kascade {
namespace {

using test::count_rows;
using test::error_of;
using test::TempDir;

TEST(ResultsDb, MigratesANewDatabase) {
    TempDir tmp;
    ResultsDb db(tmp.path() / "results" / "nested");
    EXPECT_TRUE(std::filesystem::is_regular_file(tmp.path() / "results" / "nested" / "kascade.db"));
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.database().execAndGet("PRAGMA journal_mode").getString(), "wal");
    EXPECT_EQ(db.database().execAndGet("PRAGMA foreign_keys").getInt(), 1);
    for (const char* table : {"models", "texts", "artifacts", "captures", "similarities", "schedules",
                              "schedule_layers", "runs", "run_metrics", "run_layers", "kernel_bench", "runs_flat",
                              "sweeps", "sweep_jobs", "job_failures", "slurm_arrays"}) {
        SQLite::Statement st(db.database(), "SELECT count(*) FROM sqlite_master WHERE name = ?");
        st.bind(1, table);
        ASSERT_TRUE(st.executeStep());
        EXPECT_EQ(st.getColumn(0).getInt(), 1) << table;
    }
}

TEST(ResultsDb, ReopeningIsANoOp) {
    TempDir tmp;
    std::string schema_before;
    {
        ResultsDb db(tmp.path());
        test::fill_sample_store(db);
        schema_before = db.database().execAndGet("SELECT group_concat(sql, ';') FROM sqlite_master").getString();
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.database().execAndGet("SELECT group_concat(sql, ';') FROM sqlite_master").getString(), schema_before);
    EXPECT_EQ(count_rows(db, "runs"), 1);
    EXPECT_EQ(count_rows(db, "schedule_layers"), 3);
}

TEST(ResultsDb, Version2RecordsTheSelectionVariantOfOlderRuns) {
    // A version-1 database with a dense and a sparse run: the sparse run was tile-granular, post-softmax, with the
    // per-tile visible-context k rule (all that version 1's kascade could run); the dense run has no variant.
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec(schema_migrations()[0].sql);
        raw.exec("PRAGMA user_version = 1");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        const char* run =
            "INSERT INTO runs (key, model_id, text_id, method, tile, topk_pct, k_min, ctx, token_offset, "
            "n_tokens, git_commit, machine, threads, started_at, finished_at) VALUES ";
        raw.exec(std::string(run) + "('a', 1, 1, 'oracle', 16, 10, 128, 512, 0, 100, 'g', 'm', 1, 's', 'f')");
        raw.exec(std::string(run) + "('b', 1, 1, 'dense', NULL, NULL, NULL, 512, 0, 100, 'g', 'm', 1, 's', 'f')");
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.database()
                  .execAndGet("SELECT key_granularity || ' ' || k_rule || ' ' || round_k || ' ' || pooling FROM runs "
                              "WHERE key = 'a'")
                  .getString(),
              "tile visible 0 post_softmax");
    EXPECT_EQ(db.database()
                  .execAndGet("SELECT count(*) FROM runs WHERE key = 'b' AND key_granularity IS NULL AND "
                              "k_rule IS NULL AND pooling IS NULL")
                  .getInt(),
              1);
    // runs_flat shows the new columns (a run row without metrics still appears: LEFT JOIN).
    EXPECT_EQ(db.database().execAndGet("SELECT key_granularity FROM runs_flat WHERE run_key = 'a'").getString(),
              "tile");
}

TEST(ResultsDb, Version4UpgradesRunsInPlaceAsPrefillRuns) {
    // A version-3 database with a run, its metrics and layers, and a higher id handed out before (a replaced run):
    // the upgrade rebuilds runs and run_layers, which must keep every row, the ids and the id counter.
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec("PRAGMA foreign_keys = ON");
        for (int v = 0; v < 3; ++v) raw.exec(schema_migrations()[v].sql);
        raw.exec("PRAGMA user_version = 3");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec(
            "INSERT INTO runs (id, key, model_id, text_id, method, ctx, token_offset, n_tokens, git_commit, machine, "
            "threads, started_at, finished_at) VALUES (7, 'a', 1, 1, 'dense', 512, 0, 100, 'g', 'm', 1, 's', 'f')");
        raw.exec("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'runs'");
        raw.exec(
            "INSERT INTO run_metrics (run_id, n_scored, nll_sparse, ppl_sparse, density, wall_s) "
            "VALUES (7, 100, 1.5, 4.48, 1, 2)");
        raw.exec("INSERT INTO run_layers (run_id, layer, role, density) VALUES (7, 0, 'dense', 1), (7, 1, 'dense', 1)");
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    SQLite::Database& raw = db.database();
    EXPECT_EQ(raw.execAndGet("SELECT phase FROM runs WHERE id = 7").getString(), "prefill");
    EXPECT_EQ(count_rows(db, "run_metrics"), 1);
    EXPECT_EQ(count_rows(db, "run_layers"), 2);
    EXPECT_EQ(raw.execAndGet("SELECT seq FROM sqlite_sequence WHERE name = 'runs'").getInt(), 9);
    EXPECT_EQ(raw.execAndGet("SELECT phase || ' ' || ppl_sparse FROM runs_flat WHERE id = 7").getString(),
              "prefill 4.48");
    EXPECT_EQ(raw.execAndGet("PRAGMA foreign_keys").getInt(), 1);
    // The foreign keys still point at the rebuilt tables: deleting the run deletes its metrics and layers.
    raw.exec("DELETE FROM runs WHERE id = 7");
    EXPECT_EQ(count_rows(db, "run_metrics"), 0);
    EXPECT_EQ(count_rows(db, "run_layers"), 0);

    // Quest is a decode method with a page size; decode runs carry their token counts.
    const std::string insert =
        "INSERT INTO runs (key, model_id, text_id, method, ctx, token_offset, n_tokens, git_commit, machine, threads, "
        "started_at, finished_at, phase, prompt_tokens, decode_tokens, page_size) VALUES ";
    raw.exec(insert + "('q', 1, 1, 'quest', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, 16)");
    EXPECT_EQ(raw.execAndGet("SELECT max(id) FROM runs").getInt(), 10);
    EXPECT_THROW(
        raw.exec(insert + "('p', 1, 1, 'quest', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'prefill', NULL, NULL, 16)"),
        SQLite::Exception);
    EXPECT_THROW(
        raw.exec(insert + "('d', 1, 1, 'dense', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', NULL, 256, NULL)"),
        SQLite::Exception);
    EXPECT_THROW(
        raw.exec(insert + "('x', 1, 1, 'dense', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'generate', NULL, NULL, NULL)"),
        SQLite::Exception);
}

TEST(ResultsDb, Version8UpgradesTaskRunsInPlaceAndAdmitsDatasetRuns) {
    // A version-7 database with a task run, a sample and a higher id handed out before: the upgrade rebuilds
    // task_runs, which must keep the rows, the ids, the counter and the samples' cascade.
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec("PRAGMA foreign_keys = ON");
        for (int v = 0; v < 7; ++v) raw.exec(schema_migrations()[v].sql);
        raw.exec("PRAGMA user_version = 7");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at) VALUES (3, 'k', 1, 'passkey', 'number_match', 0, 12, 'dense', 'dense', "
            "'g', 'm', 'c')");
        raw.exec("UPDATE sqlite_sequence SET seq = 5 WHERE name = 'task_runs'");
        raw.exec("INSERT INTO task_samples VALUES (3, 1024, 50, 0, 0.5, '[\"1\"]', '1', 1, 2, 1, NULL, NULL, 1, 'f')");
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    SQLite::Database& raw = db.database();
    EXPECT_EQ(raw.execAndGet("SELECT task || ' ' || key FROM task_runs WHERE id = 3").getString(), "passkey k");
    EXPECT_EQ(raw.execAndGet("SELECT seq FROM sqlite_sequence WHERE name = 'task_runs'").getInt(), 5);
    EXPECT_EQ(raw.execAndGet("SELECT score FROM task_samples_flat WHERE task_run_id = 3").getDouble(), 1.0);
    EXPECT_EQ(raw.execAndGet("PRAGMA foreign_keys").getInt(), 1);

    // A dataset run names its dataset, length cap and chat template, and its file; other tasks have none of them.
    const std::string insert =
        "INSERT INTO task_runs (key, model_id, text_id, task, metric, seed, max_new_tokens, prefill, method, "
        "git_commit, machine, created_at, dataset_name, max_length, chat_template) VALUES ";
    raw.exec(insert +
             "('d', 1, 1, 'dataset', 'qa_f1_score', 0, 32, 'dense', 'dense', 'g', 'm', 'c', 'qasper', 512, "
             "'none')");
    EXPECT_EQ(raw.execAndGet("SELECT max(id) FROM task_runs").getInt(), 6);
    EXPECT_THROW(raw.exec(insert + "('e', 1, 1, 'dataset', 'qa_f1_score', 0, 32, 'dense', 'dense', 'g', 'm', 'c', "
                                   "NULL, 512, 'none')"),
                 SQLite::Exception);
    EXPECT_THROW(raw.exec(insert + "('f', 1, 1, 'passkey', 'number_match', 0, 32, 'dense', 'dense', 'g', 'm', 'c', "
                                   "'qasper', 512, 'none')"),
                 SQLite::Exception);
    EXPECT_THROW(raw.exec(insert + "('g', 1, NULL, 'dataset', 'qa_f1_score', 0, 32, 'dense', 'dense', 'g', 'm', "
                                   "'c', 'qasper', 512, 'none')"),
                 SQLite::Exception);
    // A sample's cut is recorded iff its prompt was longer than what the model read.
    const std::string sample =
        "INSERT INTO dataset_samples (task_run_id, sample_index, prompt_tokens, full_tokens, cut_at, answers_json, "
        "generated, score, generated_tokens, density, threads, finished_at) VALUES ";
    raw.exec(sample + "(6, 0, 512, 900, 256, '[]', 'x', 0.5, 3, 1, 1, 'f')");
    raw.exec(sample + "(6, 1, 100, 100, NULL, '[]', 'x', 1, 3, 1, 1, 'f')");
    EXPECT_THROW(raw.exec(sample + "(6, 2, 512, 900, NULL, '[]', 'x', 1, 3, 1, 1, 'f')"), SQLite::Exception);
    EXPECT_EQ(raw.execAndGet("SELECT avg(score) || ' ' || dataset_name FROM dataset_samples_flat").getString(),
              "0.75 qasper");
    raw.exec("DELETE FROM task_runs WHERE id = 6");
    EXPECT_EQ(count_rows(db, "dataset_samples"), 0);
}

TEST(ResultsDb, Version9UpgradesRunsAndTaskRunsInPlaceAndAdmitsOmniKvAndLessIsMore) {
    // A version-8 database with a Quest decode run (metrics, layers), a task run with a sample, and higher ids handed
    // out before: the upgrade rebuilds runs, run_layers and task_runs, keeping the rows, ids, counters, the cascades
    // and the views over them.
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec("PRAGMA foreign_keys = ON");
        for (int v = 0; v < 8; ++v) raw.exec(schema_migrations()[v].sql);
        raw.exec("PRAGMA user_version = 8");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec(
            "INSERT INTO runs (id, key, model_id, text_id, method, topk_tiles, ctx, token_offset, n_tokens, "
            "git_commit, machine, threads, started_at, finished_at, phase, prompt_tokens, decode_tokens, page_size) "
            "VALUES (4, 'q', 1, 1, 'quest', 4, 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, 16)");
        raw.exec("UPDATE sqlite_sequence SET seq = 6 WHERE name = 'runs'");
        raw.exec(
            "INSERT INTO run_metrics (run_id, n_scored, nll_sparse, ppl_sparse, density, wall_s) "
            "VALUES (4, 256, 1.5, 4.48, 0.5, 2)");
        raw.exec(
            "INSERT INTO run_layers (run_id, layer, role, density) VALUES (4, 0, 'dense', 1), (4, 2, 'quest', 0.5)");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at) VALUES (3, 'k', 1, 'passkey', 'number_match', 0, 12, 'dense', 'dense', "
            "'g', 'm', 'c')");
        raw.exec("UPDATE sqlite_sequence SET seq = 5 WHERE name = 'task_runs'");
        raw.exec("INSERT INTO task_samples VALUES (3, 1024, 50, 0, 0.5, '[\"1\"]', '1', 1, 2, 1, NULL, NULL, 1, 'f')");
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    SQLite::Database& raw = db.database();
    EXPECT_EQ(raw.execAndGet("SELECT method || ' ' || page_size || ' ' || phase FROM runs WHERE id = 4").getString(),
              "quest 16 decode");
    EXPECT_EQ(raw.execAndGet("SELECT seq FROM sqlite_sequence WHERE name = 'runs'").getInt(), 6);
    EXPECT_EQ(raw.execAndGet("SELECT seq FROM sqlite_sequence WHERE name = 'task_runs'").getInt(), 5);
    EXPECT_EQ(raw.execAndGet("SELECT ppl_sparse FROM runs_flat WHERE id = 4").getDouble(), 4.48);
    EXPECT_TRUE(raw.execAndGet("SELECT selection_layers FROM runs_flat WHERE id = 4").isNull());
    EXPECT_EQ(raw.execAndGet("SELECT score FROM task_samples_flat WHERE task_run_id = 3").getDouble(), 1.0);
    EXPECT_EQ(count_rows(db, "run_layers"), 2);
    EXPECT_EQ(raw.execAndGet("PRAGMA foreign_keys").getInt(), 1);
    EXPECT_EQ(raw.execAndGet("PRAGMA legacy_alter_table").getInt(), 0);

    // OmniKV and LessIsMore are decode runs with their layer list; LessIsMore also has its window ratio.
    const std::string insert =
        "INSERT INTO runs (key, model_id, text_id, method, ctx, token_offset, n_tokens, git_commit, machine, threads, "
        "started_at, finished_at, phase, prompt_tokens, decode_tokens, selection_layers, window_ratio) VALUES ";
    raw.exec(insert + "('o', 1, 1, 'omnikv', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, '[2]', NULL)");
    raw.exec(insert +
             "('l', 1, 1, 'lessismore', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, '[2,13]', 0.25)");
    EXPECT_EQ(raw.execAndGet("SELECT max(id) FROM runs").getInt(), 8);
    for (const char* bad :
         {"('a', 1, 1, 'omnikv', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, NULL, NULL)",
          "('b', 1, 1, 'omnikv', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'prefill', NULL, NULL, '[2]', NULL)",
          "('c', 1, 1, 'lessismore', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, '[2]', NULL)",
          "('d', 1, 1, 'lessismore', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, '[2]', 1.5)",
          "('e', 1, 1, 'dense', 512, 0, 256, 'g', 'm', 1, 's', 'f', 'decode', 256, 256, '[2]', NULL)"})
        EXPECT_THROW(raw.exec(insert + bad), SQLite::Exception) << bad;
    raw.exec(
        "INSERT INTO run_layers (run_id, layer, role, density) VALUES (7, 2, 'filter', 1), (8, 2, 'selection', 1)");
    EXPECT_THROW(raw.exec("INSERT INTO run_layers (run_id, layer, role, density) VALUES (7, 3, 'bogus', 1)"),
                 SQLite::Exception);
    const std::string task =
        "INSERT INTO task_runs (key, model_id, task, metric, seed, max_new_tokens, prefill, method, git_commit, "
        "machine, created_at, selection_layers, window_ratio) VALUES ";
    raw.exec(task + "('t', 1, 'passkey', 'number_match', 0, 12, 'dense', 'lessismore', 'g', 'm', 'c', '[1]', 0.5)");
    EXPECT_EQ(raw.execAndGet("SELECT max(id) FROM task_runs").getInt(), 6);
    EXPECT_THROW(raw.exec(task + "('u', 1, 'passkey', 'number_match', 0, 12, 'dense', 'omnikv', 'g', 'm', 'c', NULL, "
                                 "NULL)"),
                 SQLite::Exception);
    // The cascades still reach the rebuilt tables.
    raw.exec("DELETE FROM runs WHERE id = 4");
    EXPECT_EQ(count_rows(db, "run_metrics"), 0);
    raw.exec("DELETE FROM task_runs WHERE id = 3");
    EXPECT_EQ(count_rows(db, "task_samples"), 0);
}

TEST(ResultsDb, Version5AddsArtifactChecksumsThatOlderArtifactsLack) {
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 3) raw.exec(m.sql);
        }
        raw.exec("PRAGMA user_version = 3");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec(
            "INSERT INTO artifacts VALUES ('old', 'capture', 'artifacts/capture/old.h5', 1, 2, '{}', '{}', 10, "
            "'t')");
    }
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    const std::optional<ArtifactRecord> old = db.find_artifact("old");
    ASSERT_TRUE(old.has_value());
    EXPECT_FALSE(old->checksum.has_value());
    EXPECT_THROW(db.database().exec("UPDATE artifacts SET checksum = 'short' WHERE key = 'old'"), SQLite::Exception);
}

TEST(ResultsDb, ReadOnlyOpenOfAnOlderDatabaseSeesTheCurrentColumnsAndLeavesTheFile) {
    // A results folder from an older kascade, read by a read-only command (status, sweep --dry-run, query) before
    // anything writes to it: the readers select today's columns (artifacts.checksum, runs.phase).
    TempDir tmp;
    const std::filesystem::path file = tmp.path() / "kascade.db";
    {
        SQLite::Database raw(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 3) raw.exec(m.sql);
        }
        raw.exec("PRAGMA user_version = 3");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec(
            "INSERT INTO artifacts VALUES ('old', 'capture', 'artifacts/capture/old.h5', 1, 2, '{}', '{}', 10, "
            "'t')");
        raw.exec(
            "INSERT INTO runs (id, key, model_id, text_id, method, ctx, token_offset, n_tokens, git_commit, machine, "
            "threads, started_at, finished_at) VALUES (7, 'a', 1, 1, 'dense', 512, 0, 100, 'g', 'm', 1, 's', 'f')");
    }
    const auto written = std::filesystem::last_write_time(file);
    {
        ResultsDb db(tmp.path(), DbAccess::ReadOnly);
        EXPECT_EQ(db.schema_version(), kSchemaVersion);
        const std::optional<ArtifactRecord> old = db.find_artifact("old");
        ASSERT_TRUE(old.has_value());
        EXPECT_FALSE(old->checksum.has_value());
        EXPECT_TRUE(db.find_run("a").has_value());
    }
    {
        QueryDb query(file);
        const QueryResult r = query.select("SELECT phase FROM runs_flat WHERE id = 7");
        ASSERT_EQ(r.rows.size(), 1u);
        EXPECT_EQ(std::get<std::string>(r.rows[0][0]), "prefill");
    }
    SQLite::Database raw(file, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), 3);
    EXPECT_EQ(std::filesystem::last_write_time(file), written);
}

/// Every row of a query on a raw connection, each value as text, with the column names first.
std::vector<std::vector<std::string>> text_rows(SQLite::Database& db, const std::string& sql) {
    SQLite::Statement st(db, sql);
    std::vector<std::vector<std::string>> rows(1);
    for (int c = 0; c < st.getColumnCount(); ++c) rows[0].push_back(st.getColumnName(c));
    while (st.executeStep()) {
        std::vector<std::string> row;
        for (int c = 0; c < st.getColumnCount(); ++c)
            row.push_back(st.getColumn(c).isNull() ? "NULL" : st.getColumn(c).getString());
        rows.push_back(std::move(row));
    }
    return rows;
}

/// The rows of `view` now, in the columns it had when `before` (text_rows of it: column names first) was read: what a
/// migration that adds columns must leave unchanged.
std::vector<std::vector<std::string>> rows_in_earlier_columns(SQLite::Database& db, const std::string& view,
                                                              const std::vector<std::vector<std::string>>& before) {
    std::string columns;
    for (const std::string& name : before[0]) columns += (columns.empty() ? "" : ", ") + name;
    return text_rows(db, "SELECT " + columns + " FROM " + view);
}

TEST(ResultsDb, Version10ReadsEveryRunOfAVersion9DatabaseBackUnchangedAndExact) {
    // A results folder of the last release (schema version 9) with a sparse run, its metrics and a task run with a
    // sample: after the migration every column each view showed reads back the same, and the runs are exact ones.
    TempDir tmp;
    const std::filesystem::path file = tmp.path() / "kascade.db";
    std::vector<std::vector<std::string>> runs_before, tasks_before;
    {
        SQLite::Database raw(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 9) raw.exec(m.sql);
        }
        raw.exec("PRAGMA user_version = 9");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec(
            "INSERT INTO runs (id, key, model_id, text_id, method, tile, topk_tiles, ctx, token_offset, n_tokens, "
            "git_commit, machine, threads, started_at, finished_at, key_granularity, k_rule, round_k, pooling) VALUES "
            "(7, 'a', 1, 1, 'oracle', 16, 4, 512, 0, 100, 'g', 'm', 2, 's', 'f', 'token', 'visible', 0, "
            "'post_softmax')");
        raw.exec(
            "INSERT INTO run_metrics (run_id, n_scored, nll_dense, ppl_dense, nll_sparse, ppl_sparse, degradation_pct, "
            "density, tokens_per_s, wall_s) VALUES (7, 99, 1.25, 3.4903429574618414, 1.3, 3.6692966676192444, "
            "5.127109637602412, 0.375, 812.5, 1.5)");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, tile, "
            "topk_pct, k_min, k_rule, round_k, key_granularity, pooling, git_commit, machine, created_at) VALUES "
            "(3, 'b', 1, 'passkey', 'number_match', 1, 8, 'sparse', 'streaming', 16, 25, 32, 'sequence', 0, 'token', "
            "'post_softmax', 'g', 'm', 'c')");
        raw.exec(
            "INSERT INTO task_samples (task_run_id, length, depth_pct, sample_index, needle_depth, expected_json, "
            "generated, score, generated_tokens, density, prefill_tokens_per_s, decode_tokens_per_s, threads, "
            "finished_at) VALUES (3, 1024, 50, 0, 0.5, '[\"12345\"]', '12345', 1, 3, 0.5, 100, 10, 2, 'f')");
        runs_before = text_rows(raw, "SELECT * FROM runs_flat");
        tasks_before = text_rows(raw, "SELECT * FROM task_samples_flat");
    }
    { ResultsDb db(tmp.path()); }  // a writer migrates the file
    SQLite::Database raw(file, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
    EXPECT_EQ(rows_in_earlier_columns(raw, "runs_flat", runs_before), runs_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "task_samples_flat", tasks_before), tasks_before);
    EXPECT_EQ(raw.execAndGet("SELECT matmul FROM runs_flat WHERE id = 7").getString(), "exact");
    EXPECT_EQ(raw.execAndGet("SELECT matmul FROM task_samples_flat WHERE task_run_id = 3").getString(), "exact");
}

/// A task sample of task run 3 (density `task_density`) and a dataset sample of dataset run 4 (both runs inserted
/// before), in the columns the
/// sample tables had from version 8 to version 11.
void insert_sample_rows(SQLite::Database& raw, const std::string& task_density) {
    raw.exec(
        "INSERT INTO task_samples (task_run_id, length, depth_pct, sample_index, needle_depth, expected_json, "
        "generated, score, generated_tokens, density, prefill_tokens_per_s, decode_tokens_per_s, threads, "
        "finished_at) VALUES (3, 1024, 50, 0, 0.5, '[\"12345\"]', '12345', 1, 3, " +
        task_density + ", 100, 10, 2, 'f')");
    raw.exec(
        "INSERT INTO dataset_samples (task_run_id, sample_index, sample_id, prompt_tokens, full_tokens, cut_at, "
        "answers_json, generated, score, generated_tokens, density, prefill_tokens_per_s, decode_tokens_per_s, "
        "threads, finished_at) VALUES (4, 0, 'q0', 800, 1024, 400, '[\"yes\"]', 'yes', 1, 1, 1, 100, 10, 2, 'f')");
}

TEST(ResultsDb, Version11ReadsEveryRunOfAVersion10DatabaseBackUnchangedWithAnF32Cache) {
    // A results folder of schema version 10 with a bf16-matmul sparse run and its metrics, a task run with a sample and
    // a dataset run with a sample: after the migration every column each of the three views showed reads back the
    // same, and every run had an fp32 KV cache (the only one kascade had before --kv-dtype).
    TempDir tmp;
    const std::filesystem::path file = tmp.path() / "kascade.db";
    std::vector<std::vector<std::string>> runs_before, tasks_before, datasets_before;
    {
        SQLite::Database raw(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 10) raw.exec(m.sql);
        }
        raw.exec("PRAGMA user_version = 10");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (1, 'h', 't', 10, 't')");
        raw.exec("INSERT INTO texts VALUES (2, 'd', 'qasper.jsonl', 20, 't')");
        raw.exec(
            "INSERT INTO runs (id, key, model_id, text_id, method, tile, topk_tiles, ctx, token_offset, n_tokens, "
            "git_commit, machine, threads, started_at, finished_at, key_granularity, k_rule, round_k, pooling, "
            "matmul) VALUES (7, 'a', 1, 1, 'oracle', 16, 4, 512, 0, 100, 'g', 'm', 2, 's', 'f', 'token', 'visible', "
            "0, 'post_softmax', 'bf16')");
        raw.exec(
            "INSERT INTO run_metrics (run_id, n_scored, nll_dense, ppl_dense, nll_sparse, ppl_sparse, degradation_pct, "
            "density, tokens_per_s, wall_s) VALUES (7, 99, 1.25, 3.4903429574618414, 1.3, 3.6692966676192444, "
            "5.127109637602412, 0.375, 812.5, 1.5)");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, tile, "
            "topk_pct, k_min, k_rule, round_k, key_granularity, pooling, git_commit, machine, created_at) VALUES "
            "(3, 'b', 1, 'passkey', 'number_match', 1, 8, 'sparse', 'streaming', 16, 25, 32, 'sequence', 0, 'token', "
            "'post_softmax', 'g', 'm', 'c')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, text_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at, dataset_name, max_length, chat_template, matmul) VALUES (4, 'c', 1, 2, "
            "'dataset', 'qa_f1_score', 0, 128, 'dense', 'dense', 'g', 'm', 'c', 'qasper', 31500, 'llama3.1', 'bf16')");
        insert_sample_rows(raw, "0.5");
        runs_before = text_rows(raw, "SELECT * FROM runs_flat");
        tasks_before = text_rows(raw, "SELECT * FROM task_samples_flat");
        datasets_before = text_rows(raw, "SELECT * FROM dataset_samples_flat");
    }
    { ResultsDb db(tmp.path()); }  // a writer migrates the file
    SQLite::Database raw(file, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
    ASSERT_EQ(runs_before.size(), 2u);
    ASSERT_EQ(tasks_before.size(), 2u);
    ASSERT_EQ(datasets_before.size(), 2u);
    EXPECT_EQ(rows_in_earlier_columns(raw, "runs_flat", runs_before), runs_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "task_samples_flat", tasks_before), tasks_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "dataset_samples_flat", datasets_before), datasets_before);
    EXPECT_EQ(raw.execAndGet("SELECT kv_dtype FROM runs_flat WHERE id = 7").getString(), "f32");
    EXPECT_EQ(raw.execAndGet("SELECT matmul FROM runs_flat WHERE id = 7").getString(), "bf16");
    EXPECT_EQ(raw.execAndGet("SELECT kv_dtype FROM task_samples_flat WHERE task_run_id = 3").getString(), "f32");
    EXPECT_EQ(raw.execAndGet("SELECT kv_dtype FROM dataset_samples_flat WHERE task_run_id = 4").getString(), "f32");
    EXPECT_EQ(raw.execAndGet("SELECT group_concat(kv_dtype) FROM task_runs").getString(), "f32,f32");
    // The column sits beside matmul in each view.
    for (const char* view : {"runs_flat", "task_samples_flat", "dataset_samples_flat"}) {
        const std::vector<std::string> columns = text_rows(raw, std::string("SELECT * FROM ") + view + " LIMIT 0")[0];
        const auto matmul = std::find(columns.begin(), columns.end(), "matmul");
        ASSERT_NE(matmul, columns.end()) << view;
        ASSERT_NE(matmul + 1, columns.end()) << view;
        EXPECT_EQ(*(matmul + 1), "kv_dtype") << view;
    }
    // The CHECK holds for the new column.
    SQLite::Database rw(file, SQLite::OPEN_READWRITE);
    EXPECT_THROW(rw.exec("UPDATE runs SET kv_dtype = 'fp8' WHERE id = 7"), SQLite::Exception);
    EXPECT_THROW(rw.exec("UPDATE task_runs SET kv_dtype = 'f16' WHERE id = 3"), SQLite::Exception);
}

/// The flat views as version 11 made them: today's less the batch column that version 12 added.
std::string flat_views_sql_of_version_11() {
    const std::string today = flat_views_sql();
    const std::regex batch_column(R"(\s*s\.batch,)");
    EXPECT_EQ(std::distance(std::sregex_iterator(today.begin(), today.end(), batch_column), std::sregex_iterator()), 2);
    return std::regex_replace(today, batch_column, "");
}

TEST(ResultsDb, Version12ReadsEveryTaskSampleOfAVersion11DatabaseBackUnchangedAsDecodedAlone) {
    // A version-11 results folder with a task sample and a dataset sample: after the migration every column of the
    // two sample views reads back the same, and each sample was decoded alone (batch 1, all kascade had before).
    TempDir tmp;
    const std::filesystem::path file = tmp.path() / "kascade.db";
    std::vector<std::vector<std::string>> tasks_before, datasets_before;
    {
        SQLite::Database raw(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 11) raw.exec(m.sql);
        }
        raw.exec(flat_views_sql_of_version_11());
        raw.exec("PRAGMA user_version = 11");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (2, 'd', 'qasper.jsonl', 20, 't')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at, kv_dtype) VALUES (3, 'b', 1, 'passkey', 'number_match', 1, 8, 'dense', "
            "'dense', 'g', 'm', 'c', 'bf16')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, text_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at, dataset_name, max_length, chat_template) VALUES (4, 'c', 1, 2, "
            "'dataset', 'qa_f1_score', 0, 128, 'dense', 'dense', 'g', 'm', 'c', 'qasper', 31500, 'llama3.1')");
        insert_sample_rows(raw, "1");
        tasks_before = text_rows(raw, "SELECT * FROM task_samples_flat");
        datasets_before = text_rows(raw, "SELECT * FROM dataset_samples_flat");
    }
    { ResultsDb db(tmp.path()); }  // a writer migrates the file
    SQLite::Database raw(file, SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
    ASSERT_EQ(tasks_before.size(), 2u);
    ASSERT_EQ(datasets_before.size(), 2u);
    EXPECT_EQ(rows_in_earlier_columns(raw, "task_samples_flat", tasks_before), tasks_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "dataset_samples_flat", datasets_before), datasets_before);
    EXPECT_EQ(raw.execAndGet("SELECT batch FROM task_samples_flat WHERE task_run_id = 3").getInt(), 1);
    EXPECT_EQ(raw.execAndGet("SELECT batch FROM dataset_samples_flat WHERE task_run_id = 4").getInt(), 1);
    SQLite::Database rw(file, SQLite::OPEN_READWRITE);
    EXPECT_THROW(rw.exec("UPDATE task_samples SET batch = 0"), SQLite::Exception);
    EXPECT_THROW(rw.exec("UPDATE dataset_samples SET batch = -1"), SQLite::Exception);
}

TEST(ResultsDb, Version13RebuildsTaskRunsKeepingEveryRowAndAdmitsQwen3WithoutThinking) {
    // A version-12 results folder with a passkey run (BF16 cache, bf16 products), a LessIsMore dataset run under
    // Qwen3's template, their samples and a task_runs counter ahead of the ids: after the rebuild every column of
    // task_runs and of the two sample views reads back the same, the counter and the cascades hold, and
    // 'qwen3-no-thinking' is a chat template (a name outside the list still is not).
    TempDir tmp;
    const std::filesystem::path file = tmp.path() / "kascade.db";
    std::vector<std::vector<std::string>> runs_before, tasks_before, datasets_before;
    {
        SQLite::Database raw(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        for (const Migration& m : schema_migrations()) {
            if (m.version <= 12) raw.exec(m.sql);
        }
        raw.exec(flat_views_sql());  // version 12's views are today's
        raw.exec("PRAGMA user_version = 12");
        raw.exec("INSERT INTO models VALUES (1, 'h', 'm', 'llama2c', 'llama2c', 5, 8, 4, 8, 64, 512, 't')");
        raw.exec("INSERT INTO texts VALUES (2, 'd', 'qasper.jsonl', 20, 't')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at, matmul, kv_dtype) VALUES (3, 'b', 1, 'passkey', 'number_match', 1, 8, "
            "'dense', 'dense', 'g', 'm', 'c', 'bf16', 'bf16')");
        raw.exec(
            "INSERT INTO task_runs (id, key, model_id, text_id, task, metric, seed, max_new_tokens, prefill, method, "
            "git_commit, machine, created_at, dataset_name, max_length, chat_template, selection_layers, "
            "window_ratio) VALUES (4, 'c', 1, 2, 'dataset', 'qa_f1_score', 0, 128, 'sparse', 'lessismore', 'g', 'm', "
            "'c', 'qasper', 31500, 'qwen3', '[2,12]', 0.25)");
        raw.exec("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'task_runs'");
        insert_sample_rows(raw, "0.5");
        runs_before = text_rows(raw, "SELECT * FROM task_runs ORDER BY id");
        tasks_before = text_rows(raw, "SELECT * FROM task_samples_flat");
        datasets_before = text_rows(raw, "SELECT * FROM dataset_samples_flat");
        EXPECT_THROW(raw.exec("UPDATE task_runs SET chat_template = 'qwen3-no-thinking' WHERE id = 4"),
                     SQLite::Exception);
    }
    { ResultsDb db(tmp.path()); }  // a writer migrates the file
    SQLite::Database raw(file, SQLite::OPEN_READWRITE);
    raw.exec("PRAGMA foreign_keys = ON");
    EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), kSchemaVersion);
    ASSERT_EQ(runs_before.size(), 3u);
    EXPECT_EQ(text_rows(raw, "SELECT * FROM task_runs ORDER BY id"), runs_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "task_samples_flat", tasks_before), tasks_before);
    EXPECT_EQ(rows_in_earlier_columns(raw, "dataset_samples_flat", datasets_before), datasets_before);
    EXPECT_EQ(raw.execAndGet("SELECT seq FROM sqlite_sequence WHERE name = 'task_runs'").getInt(), 9);
    EXPECT_EQ(raw.execAndGet("SELECT count(*) FROM sqlite_master WHERE name = 'task_runs_model'").getInt(), 1);
    raw.exec("UPDATE task_runs SET chat_template = 'qwen3-no-thinking' WHERE id = 4");
    EXPECT_EQ(raw.execAndGet("SELECT chat_template FROM dataset_samples_flat").getString(), "qwen3-no-thinking");
    EXPECT_THROW(raw.exec("UPDATE task_runs SET chat_template = 'qwen3-thinking' WHERE id = 4"), SQLite::Exception);
    raw.exec("DELETE FROM task_runs WHERE id = 4");
    EXPECT_EQ(raw.execAndGet("SELECT count(*) FROM dataset_samples").getInt(), 0);
    EXPECT_EQ(raw.execAndGet("SELECT count(*) FROM task_samples").getInt(), 1);
}

TEST(ResultsDb, RefusesADatabaseFromANewerKascade) {
    TempDir tmp;
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec(fmt::format("PRAGMA user_version = {}", kSchemaVersion + 1));
    }
    EXPECT_EQ(error_of([&] { ResultsDb db(tmp.path()); }),
              fmt::format("{} has schema version {}, this kascade reads up to {}; upgrade kascade",
                          (tmp.path() / "kascade.db").string(), kSchemaVersion + 1, kSchemaVersion));
}

TEST(ResultsDb, RefusesAFileThatIsNotADatabase) {
    TempDir tmp;
    std::ofstream(tmp.path() / "kascade.db") << "this is not an SQLite database, just some text that is long enough";
    const std::string message = error_of([&] { ResultsDb db(tmp.path()); });
    EXPECT_NE(message.find("kascade.db"), std::string::npos) << message;
    EXPECT_NE(message.find("not a database"), std::string::npos) << message;
}

TEST(ResultsDb, ResultsDirUnderARegularFileIsAnError) {
    TempDir tmp;
    std::ofstream(tmp.path() / "plain_file") << "x";
    const std::filesystem::path dir = tmp.path() / "plain_file" / "sub";
    const std::string message = error_of([&] { ResultsDb db(dir); });
    EXPECT_EQ(message, fmt::format("cannot create results directory \"{}\": Not a directory", dir.string()));
}

TEST(ResultsDb, ReadOnlyResultsDirIsAnError) {
    if (::geteuid() == 0) GTEST_SKIP() << "running as root: directory permissions are not enforced";
    TempDir tmp;
    const std::filesystem::path dir = tmp.path() / "ro";
    std::filesystem::create_directory(dir);
    ::chmod(dir.c_str(), 0555);
    EXPECT_EQ(error_of([&] { ResultsDb db(dir); }),
              fmt::format("results directory \"{}\" is not writable: Permission denied", dir.string()));
}

// The field lists of records.h must name exactly the columns the migrations create, in order.
template <class R>
void expect_fields_match_table(ResultsDb& db) {
    std::vector<std::string> columns;
    SQLite::Statement st(db.database(), fmt::format("SELECT name FROM pragma_table_info('{}')", R::table));
    while (st.executeStep()) columns.push_back(st.getColumn(0).getString());
    std::vector<std::string> expected;
    if constexpr (requires(R r) { r.id; }) expected.emplace_back("id");
    for (const auto& f : R::fields()) expected.emplace_back(f.name);
    EXPECT_EQ(columns, expected) << R::table;
}

TEST(ResultsDb, FieldListsMatchTheSchema) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    expect_fields_match_table<ModelRecord>(db);
    expect_fields_match_table<TextRecord>(db);
    expect_fields_match_table<ArtifactRecord>(db);
    expect_fields_match_table<CaptureRecord>(db);
    expect_fields_match_table<SimilarityRecord>(db);
    expect_fields_match_table<ScheduleRecord>(db);
    expect_fields_match_table<ScheduleLayerRecord>(db);
    expect_fields_match_table<RunRecord>(db);
    expect_fields_match_table<RunMetrics>(db);
    expect_fields_match_table<RunLayerRecord>(db);
    expect_fields_match_table<KernelBenchRecord>(db);
    expect_fields_match_table<TaskRunRecord>(db);
    expect_fields_match_table<TaskSampleRecord>(db);
    expect_fields_match_table<DatasetSampleRecord>(db);
    expect_fields_match_table<SweepRecord>(db);
    expect_fields_match_table<SweepJobRecord>(db);
    expect_fields_match_table<JobFailureRecord>(db);
    expect_fields_match_table<SlurmArrayRecord>(db);
}

TEST(ResultsDb, ForeignKeysAreEnforced) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    EXPECT_THROW(
        db.database().exec("INSERT INTO run_layers (run_id, layer, role, density) VALUES (999, 0, 'dense', 1)"),
        SQLite::Exception);
    EXPECT_EQ(count_rows(db, "run_layers"), 0);
    // Through the API: an artifact of a model that is not registered.
    const std::string message = error_of([&] {
        db.insert_artifact(
            ArtifactRecord{"k", "schedule", "artifacts/schedule/k.h5", 42, 1, "{}", "{}", 1, "", std::nullopt});
    });
    EXPECT_NE(message.find("FOREIGN KEY constraint failed"), std::string::npos) << message;
}

TEST(ResultsDb, IntegrityCheckPassesOnAFilledStore) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    test::fill_sample_store(db);
    EXPECT_EQ(db.database().execAndGet("PRAGMA integrity_check").getString(), "ok");
    SQLite::Statement fk(db.database(), "PRAGMA foreign_key_check");
    EXPECT_FALSE(fk.executeStep());
}

TEST(ResultsDb, RunsFlatJoinsParametersMetricsScheduleModelAndText) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    SQLite::Statement st(db.database(),
                         "SELECT method, policy, threshold, n_anchor_layers, n_reuse_layers, topk_tiles, ppl_sparse, "
                         "degradation_pct, model_path, text_path, schedule_key, attn_ms_anchor FROM runs_flat "
                         "WHERE id = ?");
    st.bind(1, ids.run);
    ASSERT_TRUE(st.executeStep());
    EXPECT_EQ(st.getColumn(0).getString(), "kascade");
    EXPECT_EQ(st.getColumn(1).getString(), "threshold");
    EXPECT_DOUBLE_EQ(st.getColumn(2).getDouble(), 0.9);
    EXPECT_EQ(st.getColumn(3).getInt(), 2);
    EXPECT_EQ(st.getColumn(4).getInt(), 1);
    EXPECT_EQ(st.getColumn(5).getInt(), 12);
    EXPECT_DOUBLE_EQ(st.getColumn(6).getDouble(), 7.46332);
    EXPECT_DOUBLE_EQ(st.getColumn(7).getDouble(), 1.005);
    EXPECT_EQ(st.getColumn(8).getString(), "models/stories15M.bin");
    EXPECT_EQ(st.getColumn(9).getString(), "data/tinystories.txt");
    EXPECT_EQ(st.getColumn(10).getString(), "sched-1");
    EXPECT_TRUE(st.getColumn(11).isNull());
    EXPECT_FALSE(st.executeStep());
}

TEST(ResultsDb, AFailedRunInsertLeavesNothing) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    RunRecord run = test::sample_run(ids.model, ids.text, ids.schedule);
    run.key = "run-dup-layer";
    std::vector<RunLayerRecord> layers = test::sample_run_layers();
    layers.push_back(layers[1]);  // layer 1 twice: the last statement of the transaction fails
    const std::string message = error_of([&] { db.insert_run(run, test::sample_metrics(), layers); });
    EXPECT_NE(message.find("storing run run-dup-layer"), std::string::npos) << message;
    EXPECT_NE(message.find("UNIQUE constraint failed: run_layers.run_id, run_layers.layer"), std::string::npos)
        << message;
    EXPECT_FALSE(db.find_run("run-dup-layer").has_value());
    EXPECT_EQ(count_rows(db, "runs"), 1);
    EXPECT_EQ(count_rows(db, "run_metrics"), 1);
    EXPECT_EQ(count_rows(db, "run_layers"), 3);
}

TEST(ResultsDb, ChecksRejectValuesOutsideTheVocabulary) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    RunRecord run = test::sample_run(ids.model, ids.text, std::nullopt);
    run.key = "run-typo";
    run.method = "kascad";
    const std::string message = error_of([&] { db.insert_run(run, test::sample_metrics(), {}); });
    EXPECT_NE(message.find("CHECK constraint failed"), std::string::npos) << message;
    // A kascade run needs a schedule (and only kascade runs have one).
    run.method = "kascade";
    EXPECT_THROW(db.insert_run(run, test::sample_metrics(), {}), Error);
    EXPECT_EQ(count_rows(db, "runs"), 1);
}

TEST(ResultsDb, RunRoundTripWithScheduleAndLayers) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    ASSERT_EQ(db.find_run("run-1"), ids.run);
    EXPECT_FALSE(db.find_run("run-404").has_value());

    const RunDetails d = db.load_run(ids.run);
    EXPECT_EQ(d.run.id, ids.run);
    EXPECT_EQ(d.run.key, "run-1");
    EXPECT_EQ(d.run.method, "kascade");
    EXPECT_EQ(d.run.topk_tiles, 12);
    EXPECT_FALSE(d.run.topk_pct.has_value());
    EXPECT_EQ(d.run.status, "done");
    EXPECT_EQ(d.metrics.run_id, ids.run);
    EXPECT_EQ(d.metrics.n_scored, 2040);
    EXPECT_DOUBLE_EQ(*d.metrics.nll_dense, 2.0);
    EXPECT_FALSE(d.metrics.attn_ms_anchor.has_value());
    ASSERT_EQ(d.layers.size(), 3u);
    EXPECT_EQ(d.layers[1].role, "reuse");
    EXPECT_EQ(d.layers[1].anchor_layer, 0);
    EXPECT_DOUBLE_EQ(*d.layers[1].out_rel_error, 0.02);
    ASSERT_TRUE(d.schedule.has_value());
    EXPECT_EQ(d.schedule->record.key, "sched-1");
    EXPECT_EQ(d.schedule->record.n_layers, 3);
    EXPECT_EQ(d.schedule->record.n_anchor_layers, 2);
    EXPECT_EQ(d.schedule->record.n_reuse_layers, 1);
    ASSERT_EQ(d.schedule->layers.size(), 3u);
    EXPECT_EQ(d.schedule->layers[1].head_map_json, "[0,0]");
    EXPECT_EQ(d.schedule->layers[1].schedule_id, ids.schedule);

    EXPECT_EQ(db.list_runs().size(), 1u);
    EXPECT_EQ(error_of([&] { db.load_run(77); }), fmt::format("{}: there is no run with id 77", db.db_file().string()));
}

// The same key means the same inputs and parameters: a second insert (another process finished the same run
// first) is a cache hit that writes nothing; only a --force re-run replaces the stored run.
TEST(ResultsDb, SameRunKeyIsACacheHitUnlessReplacing) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    const RunRecord run = test::sample_run(ids.model, ids.text, ids.schedule);
    RunMetrics better = test::sample_metrics();
    better.ppl_sparse = 7.4;
    const StoredRow again = db.insert_run(run, better, {test::sample_run_layers()[0]});
    EXPECT_EQ(again.id, ids.run);
    EXPECT_FALSE(again.inserted);
    EXPECT_EQ(count_rows(db, "run_layers"), 3);
    EXPECT_DOUBLE_EQ(db.load_run(ids.run).metrics.ppl_sparse, test::sample_metrics().ppl_sparse);

    const StoredRow replaced = db.insert_run(run, better, {test::sample_run_layers()[0]}, /*replace=*/true);
    EXPECT_TRUE(replaced.inserted);
    EXPECT_NE(replaced.id, ids.run);
    EXPECT_EQ(count_rows(db, "runs"), 1);
    EXPECT_EQ(count_rows(db, "run_metrics"), 1);
    EXPECT_EQ(count_rows(db, "run_layers"), 1);
    EXPECT_DOUBLE_EQ(db.load_run(replaced.id).metrics.ppl_sparse, 7.4);
}

TEST(ResultsDb, ScheduleWithAnExistingKeyReturnsTheStoredId) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    EXPECT_EQ(db.insert_schedule(test::sample_schedule(ids.model), test::sample_schedule_layers()), ids.schedule);
    EXPECT_EQ(count_rows(db, "schedules"), 1);
    EXPECT_EQ(count_rows(db, "schedule_layers"), 3);
    EXPECT_EQ(db.find_schedule("sched-1")->record.id, ids.schedule);
    EXPECT_FALSE(db.find_schedule("nope").has_value());
    EXPECT_EQ(db.list_schedules().size(), 1u);
}

TEST(ResultsDb, ScheduleLayersAreChecked) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    ScheduleRecord s = test::sample_schedule(ids.model);
    s.key = "sched-bad";
    std::vector<ScheduleLayerRecord> layers = test::sample_schedule_layers();
    layers[2] = {0, 2, "reuse", 1, "[0,1]", 0.8};
    EXPECT_EQ(error_of([&] { db.insert_schedule(s, layers); }),
              fmt::format("{}: schedule sched-bad layer 2 reuses layer 1, which is itself a reuse layer",
                          db.db_file().string()));
    layers = test::sample_schedule_layers();
    std::swap(layers[1], layers[2]);
    EXPECT_EQ(error_of([&] { db.insert_schedule(s, layers); }),
              fmt::format("{}: schedule sched-bad lists layer 2 at position 1, expected 1", db.db_file().string()));
    EXPECT_EQ(count_rows(db, "schedules"), 1);
}

TEST(ResultsDb, ModelsAndTextsAreStoredOncePerHash) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const std::int64_t model = db.upsert_model(test::sample_model());
    ModelRecord moved = test::sample_model();
    moved.path = "elsewhere/stories15M.bin";
    EXPECT_EQ(db.upsert_model(moved), model);
    EXPECT_EQ(db.find_model(model)->path, "models/stories15M.bin");
    EXPECT_EQ(db.find_model(model)->n_kv_heads, 2);
    EXPECT_FALSE(db.find_model(model)->created_at.empty());
    const std::int64_t text = db.upsert_text(test::sample_text());
    EXPECT_EQ(db.upsert_text(test::sample_text()), text);
    EXPECT_EQ(db.find_text(text)->bytes, 12345);
    EXPECT_EQ(count_rows(db, "models"), 1);
    EXPECT_EQ(count_rows(db, "texts"), 1);
}

TEST(ResultsDb, ArtifactsAreFoundByKeyAndReplacedOnReinsert) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(db);
    const std::optional<ArtifactRecord> cap = db.find_artifact("cap-1");
    ASSERT_TRUE(cap.has_value());
    EXPECT_EQ(cap->stage, "capture");
    EXPECT_EQ(cap->path, "artifacts/capture/cap-1.h5");
    EXPECT_EQ(db.find_capture("cap-1")->tile, 16);
    EXPECT_EQ(db.find_similarity("sim-1")->topk_tiles, 12);
    EXPECT_FALSE(db.find_similarity("sim-1")->topk_pct.has_value());
    EXPECT_FALSE(db.find_artifact("nope").has_value());

    // A --force recompute of the capture writes the row again, even though a similarity points at it.
    ArtifactRecord again = *cap;
    again.bytes = 2000;
    db.insert_artifact(again, CaptureRecord{"cap-1", ids.model, ids.text, "tok", 0, 2048, 256, 16, 1});
    EXPECT_EQ(db.find_artifact("cap-1")->bytes, 2000);
    EXPECT_EQ(db.find_capture("cap-1")->save_qk, 1);
    EXPECT_EQ(db.list_artifacts().size(), 2u);
    EXPECT_EQ(db.list_artifacts("similarity").size(), 1u);
    EXPECT_EQ(db.list_artifacts("schedule").size(), 0u);

    again.stage = "similarity";
    EXPECT_EQ(error_of([&] { db.insert_artifact(again); }),
              fmt::format("{}: artifact cap-1 has stage 'similarity' but was stored as a schedule artifact",
                          db.db_file().string()));
}

// Two connections stand for two sweep processes: each sees the other's committed rows, none blocks for good.
TEST(ResultsDb, TwoConnectionsShareTheStore) {
    TempDir tmp;
    ResultsDb a(tmp.path());
    ResultsDb b(tmp.path());
    const test::SampleIds ids = test::fill_sample_store(a);
    RunRecord run = test::sample_run(ids.model, ids.text, ids.schedule);
    run.key = "run-from-b";
    const std::int64_t id = b.insert_run(run, test::sample_metrics(), test::sample_run_layers()).id;
    EXPECT_EQ(a.find_run("run-from-b"), id);
    EXPECT_EQ(b.upsert_model(test::sample_model()), ids.model);
}

TEST(ResultsDb, KernelBenchRows) {
    TempDir tmp;
    ResultsDb db(tmp.path());
    KernelBenchRecord b{0, "sparse_reuse_prefill", "{\"L\":4096}", 2, 1.25, 40.0, std::nullopt, 3.1, "abc", "host", ""};
    const std::int64_t id = db.insert_kernel_bench(b);
    EXPECT_GT(id, 0);
    EXPECT_EQ(db.database().execAndGet("SELECT gbps IS NULL FROM kernel_bench").getInt(), 1);
}

TEST(ResultsDb, UtcNowIsIso8601) {
    const std::string now = utc_now();
    ASSERT_EQ(now.size(), 20u) << now;
    EXPECT_EQ(now[4], '-');
    EXPECT_EQ(now[10], 'T');
    EXPECT_EQ(now.back(), 'Z');
}

}  // namespace
}  // namespace kascade
