// Task runs in sweeps, in parallel and across shards, on stories260K: a sweep file's [task] table plans the task
// runs `kascade task` makes (same keys, same answers), a task job counts as done only when its whole grid is stored,
// several processes on one results folder store the rows of one serial run, and `kascade merge` carries task runs
// and their samples (adding samples to a task run the destination has). Bad [task] tables write nothing.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "../pipeline/sweep_fixture.h"

namespace {

/// Two tasks x two lengths x three depths on stories260K; a threshold schedule; dense, oracle, streaming and quest;
/// both prefill modes. Plans capture, similarity, schedule and 16 task runs (dense and quest prefill densely only).
std::string task_sweep_toml(const std::string& task_table) {
    return "[model]\npath = \"" + kStoriesBin.string() + "\"\ntokenizer = \"" + kStoriesTok.string() +
           "\"\n[text]\npath = \"" + kStoriesText.string() +
           "\"\n[calibration]\noffset = 0\ntokens = 1022\n"
           "[grid]\nctx = [512]\ntile = [16]\ntopk_pct = [25]\nk_min = [16]\n"
           "[[schedules]]\npolicy = \"threshold\"\nthreshold = 0.5\nmax_reuse_dist = 2\n"
           "[baselines]\nmethods = [\"dense\", \"oracle\", \"streaming\", \"quest\"]\nquest_page = 16\n" +
           task_table;
}

const std::string kTaskTable =
    "[task]\ntasks = [\"passkey\", \"niah_single\"]\nlengths = [288, 448]\ndepths = 3\nsamples = 1\nseed = 7\n"
    "prefill = [\"sparse\", \"dense\"]\nbatch = 4\n";

/// Every stored sample with its task run's key, without timings: what "the same rows" means for task runs.
std::vector<std::vector<std::string>> task_rows(const fs::path& results) {
    return db_rows(results / "kascade.db",
                   "SELECT r.key, s.length, s.depth_pct, s.sample_index, printf('%.9f', s.needle_depth), "
                   "s.expected_json, s.generated, s.score, s.generated_tokens, printf('%.9f', s.density) "
                   "FROM task_samples s JOIN task_runs r ON r.id = s.task_run_id "
                   "ORDER BY r.key, s.length, s.depth_pct, s.sample_index");
}

std::string count(const fs::path& results, const std::string& table) {
    return db_value(results / "kascade.db", "SELECT count(*) FROM " + table);
}

/// The `kascade task` options of a stored task run (its method, budget and prefill), read back from its row.
std::string task_command_options(const std::vector<std::string>& row) {
    // row: task, method, schedule_id, prefill, tile, topk_pct, k_min, page_size
    std::string args = " --task " + row[0] + " --prefill " + row[3];
    if (row[1] == "kascade") return args + " --schedule " + row[2];
    args += " --method " + row[1];
    if (row[1] == "dense") return args;
    args += " --topk-pct " + row[5] + " --k-min " + row[6];
    return row[1] == "quest" ? args + " --page-size " + row[7] : args + " --tile " + row[4];
}

class TaskSweep : public ::testing::Test {
  protected:
    TempDir dir_{"task_sweep"};
    fs::path toml_ = dir_ / "tasks.toml";
    fs::path results_ = dir_ / "results";
    void SetUp() override { write_text(toml_, task_sweep_toml(kTaskTable)); }

    CommandResult sweep(const fs::path& results, const std::string& more = "") {
        return run_kascade("sweep " + shell_quote(toml_) + " --results " + shell_quote(results) + more);
    }
    std::string task_prefix(const fs::path& results) const {
        return "task --results " + shell_quote(results) + " --model " + shell_quote(kStoriesBin) + " --tokenizer " +
               shell_quote(kStoriesTok) + " --seed 7 --lengths 288,448 --depths 3 --samples 1";
    }
};

TEST_F(TaskSweep, PlansTheTaskRunsOfTheTaskCommand) {
    const CommandResult first = sweep(results_);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    // capture, similarity, schedule; 2 tasks x (dense 1 + oracle 2 + streaming 2 + quest 1 + kascade 2) task runs.
    EXPECT_NE(first.out.find("19 jobs, 0 stored, 19 to compute"), std::string::npos) << first.out;
    EXPECT_EQ(count(results_, "task_runs"), "16");
    EXPECT_EQ(count(results_, "task_samples"), "96");
    EXPECT_EQ(count(results_, "runs"), "0");  // no [test] table: no perplexity runs
    // Six samples per task run, answered four and two at a time (task.batch).
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT group_concat(n, ',') FROM (SELECT batch, count(*) AS n FROM "
                       "task_samples GROUP BY batch ORDER BY batch)"),
              "32,64");
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT count(*) FROM task_runs WHERE method IN ('dense', 'quest') AND prefill = 'sparse'"),
              "0");
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT count(*) FROM sweep_jobs WHERE stage = 'task' AND task_grid = "
                       "'{\"depths_pct\":[0.0,50.0,100.0],\"lengths\":[288,448],\"samples\":1}'"),
              "16");
    const CommandResult status = run_kascade("status --results " + shell_quote(results_));
    ASSERT_EQ(status.exit_code, 0) << status.err;
    // jobs, done, pending: every task job is done.
    EXPECT_TRUE(std::regex_search(status.out, std::regex(R"(\s19\s+19\s+0\s)"))) << status.out;

    const CommandResult again = sweep(results_);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("19 jobs, 19 stored, 0 to compute"), std::string::npos) << again.out;

    // The same task runs made one by one with `kascade task`, one sample at a time (in a copy whose task rows are
    // deleted, so that the schedule ids are the sweep's): the same keys and the same answers.
    const fs::path by_hand = dir_ / "by-hand";
    fs::copy(results_, by_hand, fs::copy_options::recursive);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((by_hand / "kascade.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA foreign_keys = ON; DELETE FROM task_runs", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    ASSERT_EQ(count(by_hand, "task_samples"), "0");
    for (const auto& row :
         db_rows(results_ / "kascade.db",
                 "SELECT task, method, schedule_id, prefill, tile, topk_pct, k_min, page_size FROM task_runs")) {
        const CommandResult r = run_kascade(task_prefix(by_hand) + task_command_options(row));
        ASSERT_EQ(r.exit_code, 0) << task_command_options(row) << ": " << r.err;
    }
    EXPECT_EQ(task_rows(by_hand), task_rows(results_));
}

TEST_F(TaskSweep, ATaskJobIsDoneOnlyWhenItsWholeGridIsStored) {
    // One length of the sweep's dense passkey run, by hand: the same task run, half its grid.
    const CommandResult half = run_kascade("task --results " + shell_quote(results_) + " --model " +
                                           shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) +
                                           " --seed 7 --lengths 288 --depths 3 --task passkey "
                                           "--method dense");
    ASSERT_EQ(half.exit_code, 0) << half.err;
    const auto half_rows = task_rows(results_);
    ASSERT_EQ(half_rows.size(), 3u);

    const CommandResult dry = sweep(results_, " --dry-run");
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("19 jobs, 0 stored"), std::string::npos) << dry.out;
    // Job 1 alone (dense niah_single): kascade status counts it done and job 0, the half-stored run, pending.
    ASSERT_EQ(sweep(results_, " --job-index 1").exit_code, 0);
    ASSERT_EQ(count(results_, "task_samples"), "9");
    const CommandResult status = run_kascade("status --results " + shell_quote(results_));
    EXPECT_TRUE(std::regex_search(status.out, std::regex(R"(\s19\s+1\s+18\s)"))) << status.out;
    ASSERT_EQ(sweep(results_).exit_code, 0);
    EXPECT_EQ(count(results_, "task_runs"), "16");
    EXPECT_EQ(count(results_, "task_samples"), "96");
    // The three samples stored first are the ones the sweep's run holds (kept, not made again).
    std::set<std::vector<std::string>> all;
    for (const auto& row : task_rows(results_)) all.insert(row);
    for (const auto& row : half_rows) EXPECT_TRUE(all.count(row));
}

TEST_F(TaskSweep, ConcurrentProcessesStoreTheRowsOfASerialRun) {
    const fs::path serial = dir_ / "serial";
    ASSERT_EQ(sweep(serial).exit_code, 0);

    // Three `kascade sweep` processes and one with two local workers, all at once, on a fresh folder.
    std::vector<pid_t> pids;
    for (int i = 0; i < 3; ++i) {
        pids.push_back(start_shell(shell_quote(KASCADE_BIN) + " sweep " + shell_quote(toml_) + " --results " +
                                   shell_quote(results_) + " >/dev/null 2>" +
                                   shell_quote(dir_ / ("err" + std::to_string(i)))));
    }
    pids.push_back(start_shell(shell_quote(KASCADE_BIN) + " sweep " + shell_quote(toml_) + " --jobs 2 --results " +
                               shell_quote(results_) + " >/dev/null 2>" + shell_quote(dir_ / "err-jobs")));
    for (pid_t pid : pids) EXPECT_EQ(wait_exit_code(pid), 0);
    EXPECT_EQ(task_rows(results_), task_rows(serial));
    EXPECT_EQ(count(results_, "task_runs"), "16");

    // Two identical `kascade task` commands at once: one task run, each sample once.
    const fs::path pair = dir_ / "pair";
    const std::string command = shell_quote(KASCADE_BIN) + " " + task_prefix(pair) +
                                " --task niah_single --method oracle --topk-pct 25 --k-min 16 --tile 16 >/dev/null";
    const pid_t a = start_shell(command + " 2>" + shell_quote(dir_ / "err-a"));
    const pid_t b = start_shell(command + " 2>" + shell_quote(dir_ / "err-b"));
    EXPECT_EQ(wait_exit_code(a), 0);
    EXPECT_EQ(wait_exit_code(b), 0);
    EXPECT_EQ(count(pair, "task_runs"), "1");
    const std::string key = db_value(pair / "kascade.db", "SELECT key FROM task_runs");
    std::vector<std::vector<std::string>> expected;
    for (const auto& row : task_rows(serial))
        if (row[0] == key) expected.push_back(row);
    EXPECT_EQ(expected.size(), 6u);
    EXPECT_EQ(task_rows(pair), expected);
}

TEST_F(TaskSweep, ShardedJobsMergedEqualTheSharedFolder) {
    const fs::path shards = dir_ / "shards", merged = dir_ / "merged";
    for (int i = 0; i < 19; ++i) {  // in plan order, as the dependency levels of the Slurm arrays run them
        const CommandResult r =
            sweep(merged, " --job-index " + std::to_string(i) + " --shard-dir " + shell_quote(shards));
        ASSERT_EQ(r.exit_code, 0) << i << ": " << r.err;
    }
    std::string shard_list;
    for (const auto& sweep_dir : fs::directory_iterator(shards))
        for (const auto& job : fs::directory_iterator(sweep_dir.path())) shard_list += " " + shell_quote(job.path());
    const CommandResult merge = run_kascade("merge" + shard_list + " --into " + shell_quote(merged));
    ASSERT_EQ(merge.exit_code, 0) << merge.err;
    EXPECT_NE(merge.out.find("16 task runs (96 samples)"), std::string::npos) << merge.out;
    ASSERT_EQ(sweep(results_).exit_code, 0);
    EXPECT_EQ(task_rows(merged), task_rows(results_));
    // Every task job of the merged folder is done.
    const CommandResult again = sweep(merged, " --dry-run");
    EXPECT_NE(again.out.find("19 jobs, 19 stored, 0 to compute"), std::string::npos) << again.out;
}

TEST_F(TaskSweep, MergeAddsSamplesToATaskRunTheDestinationHas) {
    const fs::path a = dir_ / "a", b = dir_ / "b";
    const std::string method = " --task passkey --method streaming --topk-pct 25 --k-min 16 --tile 16";
    const std::string model = " --model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok);
    ASSERT_EQ(run_kascade("task --results " + shell_quote(a) + model + " --lengths 288 --depths 3" + method).exit_code,
              0);
    ASSERT_EQ(
        run_kascade("task --results " + shell_quote(b) + model + " --lengths 288,448 --depths 3" + method).exit_code,
        0);
    ASSERT_EQ(count(a, "task_samples"), "3");
    const CommandResult merge = run_kascade("merge " + shell_quote(b) + " --into " + shell_quote(a));
    ASSERT_EQ(merge.exit_code, 0) << merge.err;
    EXPECT_NE(merge.out.find("0 task runs (3 samples)"), std::string::npos) << merge.out;
    EXPECT_EQ(task_rows(a), task_rows(b));
    EXPECT_EQ(count(a, "task_runs"), "1");
    const CommandResult again = run_kascade("merge " + shell_quote(b) + " --into " + shell_quote(a));
    EXPECT_NE(again.out.find("0 task runs (0 samples)"), std::string::npos) << again.out;
    EXPECT_EQ(task_rows(a), task_rows(b));
}

TEST_F(TaskSweep, BadTaskTablesAreRefusedAndWriteNothing) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"[task]\ntask = [\"passkey\"]\nlengths = [192]\n", "unknown key task.task (did you mean tasks?)"},
        {"[task]\nlengths = [192]\n", "missing task.tasks"},
        {"[task]\ntasks = [\"paskey\"]\nlengths = [192]\n",
         "invalid task.tasks='paskey' (expected passkey, niah_single"},
        {"[task]\ntasks = \"passkey\"\n", "missing task.lengths"},
        {"[task]\ntasks = \"passkey\"\nlengths = [192]\ndepths = 3\ndepth_pcts = [50]\n", "exclude each other"},
        {"[task]\ntasks = \"passkey\"\nlengths = [192]\ndepth_pcts = [120]\n",
         "task.depth_pcts = 120 is out of range (must be in [0, 100])"},
        {"[task]\ntasks = \"passkey\"\nlengths = [192]\nprefill = \"spars\"\n",
         "invalid task.prefill='spars' (expected sparse, dense); did you mean sparse?"},
        {"[task]\ntasks = \"passkey\"\nlengths = [600]\n", "[task] passkey: invalid length 600"},
        {"[task]\ntasks = \"passkey\"\nlengths = [192]\nbatch = 0\n",
         "task.batch = 0 is out of range (must be in [1, 4096])"},
        {"[task]\ntasks = \"niah_multiquery\"\nlengths = [40]\n",
         "[task] niah_multiquery: length 40 is too short for task niah_multiquery"},
        {"[task]\ntasks = \"passkey\"\nlengths = [192]\nhaystack = \"/nonexistent/hay.txt\"\n",
         "task.haystack \"/nonexistent/hay.txt\" does not exist"},
    };
    for (const auto& [table, expected] : cases) {
        write_text(toml_, task_sweep_toml(table));
        const CommandResult r = sweep(results_);
        EXPECT_NE(r.exit_code, 0) << table;
        EXPECT_NE(r.err.find(toml_.string()), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(expected), std::string::npos) << table << "\n" << r.err;
        EXPECT_FALSE(fs::exists(results_)) << table;
    }
}

}  // namespace
