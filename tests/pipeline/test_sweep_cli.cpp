// tests/pipeline/test_sweep_cli.cpp: the experiment pipeline end to end through the `kascade` executable, on the
// real stories260K model and TinyStories text, with real SQLite and HDF5 files.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>

#include "common/json_output.h"
#include "sweep_fixture.h"

namespace {

int count(const fs::path& results, const std::string& table, const std::string& where = "1") {
    return std::stoi(db_value(results / "kascade.db", "SELECT count(*) FROM " + table + " WHERE " + where));
}

/// Modification times of every artifact file: unchanged means not recomputed.
std::map<std::string, fs::file_time_type> artifact_times(const fs::path& results) {
    std::map<std::string, fs::file_time_type> t;
    for (const auto& e : fs::recursive_directory_iterator(results / "artifacts")) {
        if (e.is_regular_file()) t[e.path().string()] = e.last_write_time();
    }
    return t;
}

class SweepTest : public ::testing::Test {
  protected:
    TempDir dir_{"sweep"};
    fs::path toml_ = dir_ / "tiny.toml";
    fs::path results_ = dir_ / "results";
    void SetUp() override { write_text(toml_, tiny_sweep_toml()); }
    CommandResult sweep(const fs::path& results) {
        return run_kascade("sweep " + shell_quote(toml_) + " --results " + shell_quote(results));
    }
};

TEST_F(SweepTest, SecondRunComputesNothingAndQueryListsEveryRun) {
    const CommandResult first = sweep(results_);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    // 1 dense + per top-k (2): 3 kascade + oracle + streaming
    EXPECT_EQ(count(results_, "runs"), 11);
    EXPECT_EQ(count(results_, "artifacts", "stage = 'capture'"), 1);
    EXPECT_EQ(count(results_, "artifacts", "stage = 'similarity'"), 2);
    EXPECT_EQ(count(results_, "schedules"), 6);
    const auto times = artifact_times(results_);
    const auto results_before = run_results(results_);

    const CommandResult second = sweep(results_);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find("0 to compute"), std::string::npos) << second.out;
    EXPECT_NE(second.out.find("0 jobs computed"), std::string::npos) << second.out;
    EXPECT_EQ(count(results_, "runs"), 11);
    EXPECT_EQ(artifact_times(results_), times);
    EXPECT_EQ(run_results(results_), results_before);

    const CommandResult query = run_kascade("query runs --results " + shell_quote(results_) + " --format csv");
    ASSERT_EQ(query.exit_code, 0) << query.err;
    EXPECT_EQ(std::count(query.out.begin(), query.out.end(), '\n'), 12);  // header + 11 runs
    for (const char* column : {"ppl_sparse", "degradation_pct", "density"}) {
        EXPECT_NE(query.out.find(column), std::string::npos) << column;
    }
}

TEST_F(SweepTest, DryRunListsJobsAndWritesNothing) {
    const CommandResult r =
        run_kascade("sweep " + shell_quote(toml_) + " --dry-run --results " + shell_quote(results_));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("20 jobs, 0 stored, 20 to compute"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(SweepTest, ADeletedArtifactFileIsComputedAgain) {
    ASSERT_EQ(sweep(results_).exit_code, 0);
    const std::string capture = db_value(results_ / "kascade.db", "SELECT path FROM artifacts WHERE stage = 'capture'");
    const auto results_before = run_results(results_);
    fs::remove(results_ / capture);
    const CommandResult plan =
        run_kascade("sweep " + shell_quote(toml_) + " --dry-run --results " + shell_quote(results_));
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("20 jobs, 19 stored, 1 to compute"), std::string::npos) << plan.out;
    const CommandResult again = sweep(results_);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("1 jobs computed"), std::string::npos) << again.out;
    EXPECT_TRUE(fs::exists(results_ / capture));
    EXPECT_EQ(run_results(results_), results_before);
}

TEST_F(SweepTest, ADeletedScheduleFileIsComputedAgain) {
    ASSERT_EQ(sweep(results_).exit_code, 0);
    const std::string schedule =
        db_value(results_ / "kascade.db", "SELECT path FROM artifacts WHERE stage = 'schedule' LIMIT 1");
    const auto results_before = run_results(results_);
    const int schedules = count(results_, "schedules");
    fs::remove(results_ / schedule);
    const CommandResult plan =
        run_kascade("sweep " + shell_quote(toml_) + " --dry-run --results " + shell_quote(results_));
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_NE(plan.out.find("20 jobs, 19 stored, 1 to compute"), std::string::npos) << plan.out;
    const CommandResult again = sweep(results_);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("1 jobs computed"), std::string::npos) << again.out;
    EXPECT_TRUE(fs::exists(results_ / schedule));
    EXPECT_EQ(count(results_, "schedules"), schedules);
    EXPECT_EQ(run_results(results_), results_before);
}

TEST_F(SweepTest, ForceComputesEveryJobAgain) {
    ASSERT_EQ(sweep(results_).exit_code, 0);
    const auto results_before = run_results(results_);
    const int schedules = count(results_, "schedules"), runs = count(results_, "runs");
    const CommandResult forced =
        run_kascade("sweep " + shell_quote(toml_) + " --force --results " + shell_quote(results_));
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.out.find("20 jobs, 0 stored, 20 to compute"), std::string::npos) << forced.out;
    EXPECT_NE(forced.out.find("20 jobs computed"), std::string::npos) << forced.out;
    EXPECT_EQ(run_results(results_), results_before);
    EXPECT_EQ(count(results_, "schedules"), schedules);
    EXPECT_EQ(count(results_, "runs"), runs);
}

/// Starts `kascade sweep`, reads its log, and SIGKILLs it once `computed_lines` jobs have been computed.
void sweep_killed_after(const fs::path& toml, const fs::path& results, int computed_lines) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::dup2(fds[1], STDOUT_FILENO);
        const int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, STDERR_FILENO);
        ::close(fds[0]);
        ::execl(KASCADE_BIN, KASCADE_BIN, "sweep", toml.c_str(), "--results", results.c_str(), nullptr);
        ::_exit(127);
    }
    ::close(fds[1]);
    std::string log;
    char buffer[4096];
    int computed = 0;
    ssize_t n;
    while (computed < computed_lines && (n = ::read(fds[0], buffer, sizeof buffer)) > 0) {
        log.append(buffer, static_cast<size_t>(n));
        computed = 0;
        for (size_t at = log.find(" computed "); at != std::string::npos; at = log.find(" computed ", at + 1))
            ++computed;
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(fds[0]);
    EXPECT_TRUE(WIFSIGNALED(status) || computed < computed_lines) << log;
}

TEST_F(SweepTest, KilledThreeTimesThenResumedEqualsUninterrupted) {
    const fs::path reference = dir_ / "reference";
    ASSERT_EQ(sweep(reference).exit_code, 0);
    // Kill points: during the first similarity, in the middle of the schedules and evals, near the end.
    for (int computed_lines : {2, 5, 9}) {
        sweep_killed_after(toml_, results_, computed_lines);
    }
    const CommandResult resumed = sweep(results_);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(run_results(results_), run_results(reference));
    EXPECT_EQ(db_value(results_ / "kascade.db", "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT count(*) FROM runs r LEFT JOIN run_metrics m ON m.run_id = r.id"
                       " WHERE m.run_id IS NULL"),
              "0");
    // Every recorded artifact is a complete file; no partial file is recorded or left behind.
    for (const auto& row : db_rows(results_ / "kascade.db", "SELECT path FROM artifacts")) {
        EXPECT_TRUE(fs::exists(results_ / row[0])) << row[0];
        EXPECT_EQ(row[0].find("partial"), std::string::npos) << row[0];
    }
    for (const auto& e : fs::recursive_directory_iterator(results_ / "artifacts")) {
        EXPECT_EQ(e.path().string().find(".partial-"), std::string::npos) << e.path();
    }
}

TEST_F(SweepTest, RerunningOneStageAddsOneScheduleAndOneRun) {
    ASSERT_EQ(sweep(results_).exit_code, 0);
    const auto times = artifact_times(results_);
    const int schedules = count(results_, "schedules"), runs = count(results_, "runs");
    const std::string similarity =
        db_value(results_ / "kascade.db", "SELECT artifact_key FROM similarities WHERE topk_tiles = 4");
    const CommandResult s = run_kascade("schedule --results " + shell_quote(results_) + " --similarity " + similarity +
                                        " --policy threshold --threshold 0.42 --max-reuse-dist 3 --json");
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const std::string id = json_string(s, "schedule_id");
    const CommandResult e = run_kascade(
        "eval --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) + " --text " +
        shell_quote(kStoriesText) + " --ctx 128 --eval-tokens " + std::to_string(kTestTokens) + " --schedule " + id);
    ASSERT_EQ(e.exit_code, 0) << e.err;
    EXPECT_EQ(count(results_, "schedules"), schedules + 1);
    EXPECT_EQ(count(results_, "runs"), runs + 1);
    // No capture or similarity was recomputed: their files are untouched, and only a schedule file was added.
    const auto after = artifact_times(results_);
    for (const auto& [file, time] : times) EXPECT_EQ(after.at(file), time) << file;
    EXPECT_EQ(after.size(), times.size() + 1);
    EXPECT_EQ(count(results_, "artifacts", "stage = 'capture'"), 1);
    // The new run is tied to the new schedule and compared with the sweep's dense run of the same tokens.
    EXPECT_EQ(db_value(results_ / "kascade.db", "SELECT count(*) FROM runs WHERE schedule_id = " + id), "1");
}

TEST_F(SweepTest, OracleCoveringEveryTileIsExactlyDense) {
    const CommandResult r = run_kascade("eval --results " + shell_quote(results_) + " --model " +
                                        shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) +
                                        " --ctx 128 --eval-tokens 508 --method oracle --topk-tiles 100 --tile 16");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto row = db_rows(results_ / "kascade.db",
                             "SELECT ppl_sparse, ppl_dense, density FROM runs_flat WHERE method = 'oracle'")[0];
    const double sparse = std::stod(row[0]), dense = std::stod(row[1]);
    EXPECT_LT(std::abs(sparse - dense) / dense, 1e-6);
    EXPECT_EQ(row[2], "1.0");
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT count(*) FROM run_layers l JOIN runs r ON r.id = l.run_id "
                       "WHERE r.method = 'oracle' AND l.density != 1.0"),
              "0");
}

}  // namespace
