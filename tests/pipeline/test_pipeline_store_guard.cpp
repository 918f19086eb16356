// tests/pipeline/test_pipeline_store_guard.cpp: a command that fails writes nothing, read-only commands create
// nothing, and a results database that is not this kascade's (newer, or another program's) is refused by every
// command that opens it.
#include <gtest/gtest.h>

#include "common/json_output.h"
#include "sweep_fixture.h"

namespace {

const fs::path kStoriesHf = kShared / "models/stories260K-hf";

/// Runs SQL that writes, as another program would.
void sql_exec(const fs::path& db_file, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_file.c_str(), &db), SQLITE_OK);
    char* message = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
    const std::string text = message != nullptr ? message : "";
    sqlite3_free(message);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << text;
}

class StoreGuard : public ::testing::Test {
  protected:
    TempDir dir_{"store_guard"};
    fs::path results_ = dir_ / "results";
    fs::path db_file_ = results_ / "kascade.db";

    std::string results_arg() const { return " --results " + shell_quote(results_); }
    std::string capture_args(const fs::path& text = kStoriesText) const {
        return "capture" + results_arg() + " --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(text) +
               " --calib-tokens 254 --ctx 128";
    }
    /// capture -> similarity -> schedule on stories260K; returns the schedule id.
    std::string make_schedule() {
        const CommandResult c = run_kascade(capture_args() + " --json");
        EXPECT_EQ(c.exit_code, 0) << c.err;
        const CommandResult s =
            run_kascade("similarity" + results_arg() + " --capture " + json_string(c, "capture_key") +
                        " --topk-tiles 2 --key-granularity tile --json");
        EXPECT_EQ(s.exit_code, 0) << s.err;
        const CommandResult p = run_kascade("schedule" + results_arg() + " --similarity " +
                                            json_string(s, "similarity_key") + " --policy dp --anchors 2 --json");
        EXPECT_EQ(p.exit_code, 0) << p.err;
        return json_string(p, "schedule_id");
    }
};

TEST_F(StoreGuard, FailedStageCreatesNoResultsFolder) {
    const auto r = run_kascade(capture_args(dir_ / "missing.txt"));
    expect_error(r, "missing.txt");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(StoreGuard, FailedStageCreatesNoDatabaseInAnExistingFolder) {
    fs::create_directories(results_);
    const auto r = run_kascade(capture_args(dir_ / "missing.txt"));
    expect_error(r, "missing.txt");
    EXPECT_TRUE(fs::is_empty(results_));
}

TEST_F(StoreGuard, RefusedEvalStoresNoModelRow) {
    const std::string id = make_schedule();
    ASSERT_EQ(db_value(db_file_, "SELECT count(*) FROM models"), "1");
    const auto r = run_kascade("eval" + results_arg() + " --model " + shell_quote(kStoriesHf) + " --text " +
                               shell_quote(kStoriesText) + " --ctx 128 --schedule " + id + " --offset 300");
    expect_error(r, "was made for model");
    EXPECT_EQ(db_value(db_file_, "SELECT count(*) FROM models"), "1");
    EXPECT_EQ(db_value(db_file_, "SELECT count(*) FROM runs"), "0");
}

TEST_F(StoreGuard, StatusOnAMissingResultsFolderIsAnError) {
    const auto r = run_kascade("status" + results_arg());
    expect_error(r, "no results database at");
    EXPECT_NE(r.err.find(results_.string()), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(StoreGuard, ReadOnlyCommandsCreateNothing) {
    write_text(dir_ / "tiny.toml", tiny_sweep_toml());
    const auto dry = run_kascade("sweep " + shell_quote(dir_ / "tiny.toml") + " --dry-run" + results_arg());
    EXPECT_EQ(dry.exit_code, 0) << dry.err;
    expect_error(run_kascade("query runs" + results_arg()), "no results database at");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(StoreGuard, NewerDatabaseIsRefusedByEveryCommand) {
    const CommandResult c = run_kascade(capture_args());
    ASSERT_EQ(c.exit_code, 0) << c.err;
    sql_exec(db_file_, "PRAGMA user_version = 999");
    write_text(dir_ / "tiny.toml", tiny_sweep_toml());
    for (const std::string& args :
         {"query runs" + results_arg(), "query show 1" + results_arg(), "query sql 'SELECT 1'" + results_arg(),
          "status" + results_arg(), "sweep " + shell_quote(dir_ / "tiny.toml") + " --dry-run" + results_arg(),
          capture_args()}) {
        SCOPED_TRACE(args);
        const auto r = run_kascade(args);
        expect_error(r, "has schema version 999, this kascade reads up to");
        EXPECT_NE(r.err.find(db_file_.string()), std::string::npos) << r.err;
    }
    EXPECT_EQ(db_value(db_file_, "PRAGMA user_version"), "999");
}

TEST_F(StoreGuard, ForeignSqliteFileIsRefused) {
    fs::create_directories(results_);
    sql_exec(db_file_, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')");
    for (const std::string& args : {capture_args(), "query runs" + results_arg(), "status" + results_arg()}) {
        SCOPED_TRACE(args);
        const auto r = run_kascade(args);
        expect_error(r, "not a kascade results database");
        EXPECT_NE(r.err.find("notes"), std::string::npos) << r.err;
    }
    EXPECT_EQ(db_value(db_file_, "SELECT group_concat(name) FROM sqlite_master"), "notes");
}

}  // namespace
