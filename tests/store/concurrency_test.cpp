// tests/store/concurrency_test.cpp: several processes on one results folder, as several sweeps, stages and
// machines make them: schema creation and migration races, the same row stored twice at once, partial files.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "io/atomic_file.h"
#include "io/store/results_db.h"
#include "io/store/schema.h"
#include "store/store_test_util.h"

namespace kascade {
namespace {

using test::count_rows;
using test::TempDir;

/// Runs `body` in `n` forked processes that start together (released by one pipe write) and returns how many
/// exited with status 0. A child reports a thrown error on stderr and exits 1.
int run_together(int n, const std::function<void(int)>& body) {
    int go[2];
    EXPECT_EQ(::pipe(go), 0);
    std::vector<pid_t> children;
    for (int i = 0; i < n; ++i) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::close(go[1]);
            char c;
            if (::read(go[0], &c, 1) != 0) ::_exit(3);  // blocks until the parent closes the pipe: EOF
            int code = 0;
            try {
                body(i);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "child %d: %s\n", i, e.what());
                code = 1;
            }
            ::_exit(code);
        }
        children.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);  // every child's read returns at once
    int ok = 0;
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ++ok;
    }
    return ok;
}

TEST(StoreConcurrency, ProcessesCreatingOneFreshDatabaseAllSucceed) {
    TempDir tmp;
    const auto results = tmp.path() / "results";
    EXPECT_EQ(run_together(8,
                           [&](int) {
                               ResultsDb db(results);
                               test::fill_sample_store(db);
                           }),
              8);
    ResultsDb db(results);
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    for (const char* table : {"models", "texts", "schedules", "runs", "run_metrics"})
        EXPECT_EQ(count_rows(db, table), 1) << table;
    EXPECT_EQ(count_rows(db, "run_layers"), 3);
    EXPECT_EQ(count_rows(db, "artifacts"), 2);
    EXPECT_EQ(db.database().execAndGet("PRAGMA integrity_check").getString(), "ok");
}

TEST(StoreConcurrency, ProcessesOpeningAnOldDatabaseMigrateItOnce) {
    TempDir tmp;
    {
        // A version-1 database with results, as the previous kascade left it.
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec("PRAGMA journal_mode = WAL");
        raw.exec(schema_migrations()[0].sql);
        raw.exec("PRAGMA user_version = 1");
        raw.exec(
            "INSERT INTO models (hash, path, format, model_type, n_layers, n_heads, n_kv_heads, head_dim, dim, "
            "vocab_size, created_at) VALUES ('h', 'm.bin', 'llama2c', 'llama2c', 1, 1, 1, 8, 8, 32, 'now')");
    }
    EXPECT_EQ(run_together(6,
                           [&](int i) {
                               ResultsDb db(tmp.path());
                               db.record_sweep(SweepRecord{"sweep-" + std::to_string(i % 2), "s.toml", 1, ""},
                                               {SweepJobRecord{"sweep-" + std::to_string(i % 2), 0, "capture", "k",
                                                               "ctx=8", "[]", std::nullopt}});
                           }),
              6);
    ResultsDb db(tmp.path());
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(count_rows(db, "models"), 1);
    EXPECT_EQ(count_rows(db, "sweeps"), 2);
    EXPECT_EQ(count_rows(db, "sweep_jobs"), 2);
    EXPECT_EQ(db.database().execAndGet("PRAGMA integrity_check").getString(), "ok");
}

TEST(StoreConcurrency, ReadOnlyOpenCreatesNothingAndRefusesNewerSchemas) {
    TempDir tmp;
    EXPECT_EQ(test::error_of([&] { ResultsDb db(tmp.path() / "none", DbAccess::ReadOnly); }),
              fmt::format("no results database at \"{}\" (run a stage or a sweep first, or pass --results DIR)",
                          (tmp.path() / "none" / "kascade.db").string()));
    EXPECT_FALSE(std::filesystem::exists(tmp.path() / "none"));
    {
        ResultsDb db(tmp.path());
        test::fill_sample_store(db);
    }
    ResultsDb ro(tmp.path(), DbAccess::ReadOnly);
    EXPECT_EQ(ro.find_run("run-1").has_value(), true);
    EXPECT_THROW(ro.upsert_text(TextRecord{0, "other", "x.txt", 1, ""}), Error);
    {
        SQLite::Database raw(tmp.path() / "kascade.db", SQLite::OPEN_READWRITE);
        raw.exec("PRAGMA user_version = 99");
    }
    EXPECT_EQ(test::error_of([&] { ResultsDb db(tmp.path(), DbAccess::ReadOnly); }),
              fmt::format("{} has schema version 99, this kascade reads up to {}; upgrade kascade",
                          (tmp.path() / "kascade.db").string(), kSchemaVersion));
}

/// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
}

TEST(PartialFile, OnlyThisHostsDeadWritersAreAbandoned) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    const std::string me = std::to_string(::getpid()), dead = std::to_string(dead_pid());
    EXPECT_TRUE(is_abandoned_partial(std::string("a.h5.partial-") + host + "-" + dead));
    EXPECT_FALSE(is_abandoned_partial(std::string("a.h5.partial-") + host + "-" + me));
    EXPECT_FALSE(is_abandoned_partial("a.h5.partial-some-other-node-" + dead));
    EXPECT_TRUE(is_abandoned_partial("a.h5.partial-" + dead));  // written before hosts were recorded
    EXPECT_FALSE(is_abandoned_partial("a.h5"));
    EXPECT_FALSE(is_abandoned_partial("a.h5.partial-"));
}

TEST(PartialFile, AtomicCopyLeavesACompleteFileAndNoPartial) {
    TempDir tmp;
    const auto from = tmp.write("a.bin", "some artifact bytes");
    const auto to = tmp.path() / "sub" / "dir" / "a.bin";
    copy_file_atomic(from, to);
    copy_file_atomic(from, to);  // again over an existing file: still one complete file
    std::ifstream in(to);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "some artifact bytes");
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(to.parent_path())) {
        ++files;
        EXPECT_EQ(e.path().filename(), "a.bin");
    }
    EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace kascade
