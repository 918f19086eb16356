// tests/pipeline/test_sweep_concurrency.cpp: many kascade processes on one results folder, local sweep workers,
// single planned jobs (what a Slurm array task runs), shards and `kascade merge`, each compared with a serial
// run of the same sweeps in a folder of its own.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "sweep_fixture.h"

namespace {

/// A small sweep (7 jobs: dense, capture, similarity, schedule, kascade, oracle, streaming; 4 runs) on the
/// pipeline test's model, text and ranges.
std::string small_sweep_toml() {
    std::string toml = tiny_sweep_toml();
    toml = toml.substr(0, toml.find("[grid]"));
    return toml +
           "[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [2]\n"
           "[[schedules]]\npolicy = \"threshold\"\nthreshold = 0.5\nmax_reuse_dist = 2\n"
           "[baselines]\nmethods = [\"dense\", \"oracle\", \"streaming\"]\n";
}

/// A different sweep sharing the dense run and the capture with small_sweep_toml(): 6 jobs, 3 runs.
std::string other_sweep_toml() {
    std::string toml = tiny_sweep_toml();
    toml = toml.substr(0, toml.find("[grid]"));
    return toml +
           "[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [3]\n"
           "[[schedules]]\npolicy = \"dp\"\nanchors = 2\n"
           "[baselines]\nmethods = [\"dense\", \"oracle\"]\n";
}

/// Every table of a results database as text rows, without the columns that differ between two runs of the same
/// computation (ids, timestamps, timings, machine): what "the same rows" means.
std::map<std::string, std::vector<std::vector<std::string>>> comparable_rows(const fs::path& results) {
    const fs::path db = results / "kascade.db";
    std::map<std::string, std::vector<std::vector<std::string>>> out;
    out["artifacts"] = db_rows(db, "SELECT key, stage, path, params_json, input_keys_json FROM artifacts ORDER BY key");
    out["schedules"] =
        db_rows(db,
                "SELECT s.key, s.policy, s.n_anchor_layers, group_concat(l.role || ':' || "
                "ifnull(l.anchor_layer, '') || ':' || ifnull(l.head_map_json, ''), ' ') FROM schedules s "
                "JOIN schedule_layers l ON l.schedule_id = s.id GROUP BY s.id ORDER BY s.key");
    out["runs"] = db_rows(db,
                          "SELECT r.key, r.method, s.key, r.n_tokens, m.n_scored, printf('%.12g', m.nll_sparse), "
                          "printf('%.12g', m.nll_dense), printf('%.12g', m.density) FROM runs r JOIN run_metrics m ON "
                          "m.run_id = r.id LEFT JOIN schedules s ON s.id = r.schedule_id ORDER BY r.key");
    out["run_layers"] = db_rows(db,
                                "SELECT r.key, l.layer, l.role, l.anchor_layer, printf('%.9g', l.density), "
                                "printf('%.6g', l.out_rel_error) FROM run_layers l JOIN runs r ON r.id = l.run_id "
                                "ORDER BY r.key, l.layer");
    out["sweeps"] = db_rows(db, "SELECT key, n_jobs FROM sweeps ORDER BY key");
    return out;
}

class SweepConcurrencyTest : public ::testing::Test {
  protected:
    TempDir dir_{"concurrency"};
    fs::path small_ = dir_ / "small.toml";
    fs::path other_ = dir_ / "other.toml";
    void SetUp() override {
        write_text(small_, small_sweep_toml());
        write_text(other_, other_sweep_toml());
    }
    std::string kascade() const { return shell_quote(KASCADE_BIN); }
    /// Both sweeps, one after the other, in a folder of their own: the reference.
    fs::path serial_reference() {
        const fs::path serial = dir_ / "serial";
        for (const fs::path& toml : {small_, other_}) {
            const CommandResult r = run_kascade("sweep " + shell_quote(toml) + " --results " + shell_quote(serial));
            EXPECT_EQ(r.exit_code, 0) << r.err;
        }
        return serial;
    }
};

TEST_F(SweepConcurrencyTest, FourProcessesOnAFreshFolderEqualASerialRun) {
    const fs::path results = dir_ / "shared";
    auto logged = [&](const std::string& name, const std::string& command) {
        return command + " >" + shell_quote(dir_ / (name + ".out")) + " 2>" + shell_quote(dir_ / (name + ".err"));
    };
    auto sweep = [&](const fs::path& toml) {
        return kascade() + " sweep " + shell_quote(toml) + " --results " + shell_quote(results);
    };
    // Queries start as soon as the database file exists (bounded wait), and keep going while the sweeps write.
    const std::string db = shell_quote(results / "kascade.db");
    const std::string queries = "i=0; while [ ! -e " + db +
                                " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                                "for n in 1 2 3 4 5 6 7 8; do " +
                                kascade() + " query sql 'SELECT count(*) FROM runs_flat' --results " +
                                shell_quote(results) + " || exit 1; " + kascade() + " query runs --results " +
                                shell_quote(results) + " --format csv || exit 1; " + kascade() + " status --results " +
                                shell_quote(results) + " || exit 1; done";
    const std::vector<std::pair<std::string, std::string>> commands = {
        {"sweep-a1", sweep(small_)}, {"sweep-a2", sweep(small_)}, {"sweep-b", sweep(other_)}, {"queries", queries}};
    std::vector<pid_t> pids;
    for (const auto& [name, command] : commands) pids.push_back(start_shell(logged(name, command)));
    for (size_t i = 0; i < pids.size(); ++i) {
        EXPECT_EQ(wait_exit_code(pids[i]), 0)
            << commands[i].first << ": " << read_all(dir_ / (commands[i].first + ".err"));
    }
    EXPECT_EQ(db_value(results / "kascade.db", "PRAGMA integrity_check"), "ok");
    EXPECT_EQ(comparable_rows(results), comparable_rows(serial_reference()));
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM runs"), "6");  // 4 + 3, one dense run shared
}

TEST_F(SweepConcurrencyTest, TwoIdenticalEvalsAtOnceStoreOneRun) {
    const fs::path results = dir_ / "results";
    const std::string eval = kascade() + " eval --results " + shell_quote(results) + " --model " +
                             shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) +
                             " --ctx 128 --offset 381 --eval-tokens 508 --method oracle --topk-tiles 2 --tile 16";
    const pid_t a = start_shell(eval + " >/dev/null 2>" + shell_quote(dir_ / "a.err"));
    const pid_t b = start_shell(eval + " >/dev/null 2>" + shell_quote(dir_ / "b.err"));
    EXPECT_EQ(wait_exit_code(a), 0) << read_all(dir_ / "a.err");
    EXPECT_EQ(wait_exit_code(b), 0) << read_all(dir_ / "b.err");
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM runs WHERE method = 'oracle'"), "1");
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM runs WHERE method = 'dense'"), "1");
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM run_metrics"), "2");
}

TEST_F(SweepConcurrencyTest, LocalWorkersEqualASerialRun) {
    const fs::path results = dir_ / "workers";
    for (const fs::path& toml : {small_, other_}) {
        const CommandResult r =
            run_kascade("sweep " + shell_quote(toml) + " --jobs 2 --results " + shell_quote(results));
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.out.find("2 workers"), std::string::npos) << r.out;
    }
    EXPECT_EQ(comparable_rows(results), comparable_rows(serial_reference()));
    const CommandResult again =
        run_kascade("sweep " + shell_quote(small_) + " --jobs 2 --results " + shell_quote(results));
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 jobs computed"), std::string::npos) << again.out;
}

TEST_F(SweepConcurrencyTest, OnePlannedJobRunsAloneOnceItsInputsAreStored) {
    const fs::path results = dir_ / "results";
    auto job = [&](int index, const std::string& more = "") {
        return run_kascade("sweep " + shell_quote(small_) + " --results " + shell_quote(results) + " --job-index " +
                           std::to_string(index) + more);
    };
    // Plan: 0 dense eval, 1 capture, 2 similarity (top-k 2), ...
    const CommandResult early = job(2);
    EXPECT_NE(early.exit_code, 0);
    EXPECT_NE(early.err.find("needs job 1 (capture"), std::string::npos) << early.err;
    EXPECT_NE(early.err.find("which is not stored"), std::string::npos) << early.err;
    ASSERT_EQ(job(1).exit_code, 0);
    const CommandResult similarity = job(2);
    ASSERT_EQ(similarity.exit_code, 0) << similarity.err;
    EXPECT_NE(similarity.out.find("similarity computed"), std::string::npos) << similarity.out;
    EXPECT_NE(job(2).out.find("stored"), std::string::npos);
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM artifacts"), "2");
    EXPECT_EQ(db_value(results / "kascade.db", "SELECT count(*) FROM runs"), "0");
    // A task of a sweep submitted as another plan (the file changed since) is refused.
    const CommandResult other = job(3, " --sweep-key 0123456789abcdef");
    EXPECT_NE(other.exit_code, 0);
    EXPECT_NE(other.err.find("not the ones submitted (key 0123456789abcdef)"), std::string::npos) << other.err;
}

TEST_F(SweepConcurrencyTest, ShardedJobsMergedEqualTheSharedFolder) {
    const fs::path shards = dir_ / "shards", merged = dir_ / "merged";
    const CommandResult plan =
        run_kascade("sweep " + shell_quote(small_) + " --dry-run --results " + shell_quote(merged));
    ASSERT_EQ(plan.exit_code, 0);
    ASSERT_NE(plan.out.find("7 jobs"), std::string::npos) << plan.out;
    for (int i = 0; i < 7; ++i) {  // in plan order, as the dependency levels of the Slurm arrays run them
        const CommandResult r =
            run_kascade("sweep " + shell_quote(small_) + " --results " + shell_quote(merged) + " --job-index " +
                        std::to_string(i) + " --shard-dir " + shell_quote(shards));
        ASSERT_EQ(r.exit_code, 0) << i << ": " << r.err;
    }
    EXPECT_FALSE(fs::exists(merged / "kascade.db"));  // tasks only read the results folder
    std::string shard_list;
    for (const auto& sweep : fs::directory_iterator(shards))
        for (const auto& job : fs::directory_iterator(sweep.path())) shard_list += " " + shell_quote(job.path());
    const CommandResult merge = run_kascade("merge" + shard_list + " --into " + shell_quote(merged));
    ASSERT_EQ(merge.exit_code, 0) << merge.err;
    const fs::path shared = dir_ / "shared";
    ASSERT_EQ(run_kascade("sweep " + shell_quote(small_) + " --results " + shell_quote(shared)).exit_code, 0);
    EXPECT_EQ(comparable_rows(merged), comparable_rows(shared));
    for (const auto& row : db_rows(merged / "kascade.db", "SELECT path FROM artifacts"))
        EXPECT_TRUE(fs::exists(merged / row[0])) << row[0];
}

TEST_F(SweepConcurrencyTest, MergingTwoMachinesShardsGivesTheUnionIdempotently) {
    const fs::path a = dir_ / "machine-a", b = dir_ / "machine-b", merged = dir_ / "merged";
    ASSERT_EQ(run_kascade("sweep " + shell_quote(small_) + " --results " + shell_quote(a)).exit_code, 0);
    ASSERT_EQ(run_kascade("sweep " + shell_quote(other_) + " --results " + shell_quote(b)).exit_code, 0);
    {  // machine b's rows say so (a run's machine is not part of its key)
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open((b / "kascade.db").c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "UPDATE runs SET machine = 'node-b (other cpu)'", nullptr, nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    const std::string merge = "merge " + shell_quote(a) + " " + shell_quote(b) + " --into " + shell_quote(merged);
    const CommandResult first = run_kascade(merge);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const auto once = comparable_rows(merged);
    const auto all_tables = [&] {
        std::vector<std::vector<std::string>> rows;
        for (const auto& t : db_rows(merged / "kascade.db", "SELECT name FROM sqlite_master WHERE type = 'table'"))
            for (auto& row : db_rows(merged / "kascade.db", "SELECT * FROM " + t[0])) rows.push_back(row);
        return rows;
    };
    const auto everything_once = all_tables();
    const CommandResult second = run_kascade(merge);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find("0 runs, 0 task runs (0 samples), 0 schedules, 0 artifacts added"), std::string::npos)
        << second.out;
    EXPECT_EQ(all_tables(), everything_once);  // byte for byte the same rows, ids included

    // The union: every run of either machine, once, with its results; the same rows a serial run of both has.
    EXPECT_EQ(db_value(merged / "kascade.db", "SELECT count(*) FROM runs"), "6");
    EXPECT_EQ(db_value(merged / "kascade.db", "SELECT count(*) FROM runs WHERE machine = 'node-b (other cpu)'"),
              "2");  // the dense run is a's
    EXPECT_EQ(once, comparable_rows(serial_reference()));
    EXPECT_EQ(db_value(merged / "kascade.db", "PRAGMA integrity_check"), "ok");

    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open((b / "kascade.db").c_str(), &db), SQLITE_OK);
        ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    }
    const CommandResult newer = run_kascade(merge);
    EXPECT_NE(newer.exit_code, 0);
    EXPECT_NE(newer.err.find("has schema version 99, this kascade reads up to"), std::string::npos) << newer.err;
    EXPECT_EQ(all_tables(), everything_once);
}

}  // namespace

namespace {

TEST(SweepSlurmScripts, DryRunWritesOneArrayPerDependencyLevelWithTheRequestedResources) {
    TempDir dir("slurm-scripts");
    const fs::path toml = dir / "tiny.toml", results = dir / "results";
    write_text(toml, tiny_sweep_toml() +
                         "[slurm]\npartition = \"cpu\"\ntime = \"01:00:00\"\ncpus_per_task = 2\nmem = \"4G\"\n"
                         "array_throttle = 3\nsbatch_args = [\"--account=abc\"]\n");
    const CommandResult r = run_kascade("sweep " + shell_quote(toml) + " --slurm --dry-run --partition gpu --results " +
                                        shell_quote(results));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("20 jobs, 0 stored, 20 to submit as 4 job arrays"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(results / "kascade.db"));  // nothing submitted, nothing recorded
    std::vector<fs::path> folders;
    for (const auto& e : fs::directory_iterator(results / "slurm")) folders.push_back(e.path());
    ASSERT_EQ(folders.size(), 1u);
    // Plan of the tiny sweep: 0 dense, 1 capture, then per top-k: similarity, 3 x (schedule, kascade eval),
    // oracle, streaming (2-10 and 11-19). Oracle and streaming need only the dense run: level 1.
    const std::vector<std::string> arrays = {"0-1%3", "2,9-11,18-19%3", "3,5,7,12,14,16%3", "4,6,8,13,15,17%3"};
    for (int level = 0; level < 4; ++level) {
        const std::string script = read_all(folders[0] / ("level-" + std::to_string(level) + ".sbatch"));
        EXPECT_NE(script.find("#SBATCH --array=" + arrays[level] + "\n"), std::string::npos) << script;
        for (const char* line : {"#SBATCH --partition=gpu\n", "#SBATCH --time=01:00:00\n",
                                 "#SBATCH --cpus-per-task=2\n", "#SBATCH --mem=4G\n", "#SBATCH --account=abc\n",
                                 "--job-index \"$SLURM_ARRAY_TASK_ID\"", "export OMP_NUM_THREADS="})
            EXPECT_NE(script.find(line), std::string::npos) << line << " in\n" << script;
        EXPECT_NE(script.find("--sweep-key " + folders[0].filename().string()), std::string::npos) << script;
    }
    EXPECT_FALSE(fs::exists(folders[0] / "merge.sbatch"));

    write_text(toml, tiny_sweep_toml() + "[slurm]\npartiton = \"cpu\"\n");
    const CommandResult typo =
        run_kascade("sweep " + shell_quote(toml) + " --slurm --dry-run --results " + shell_quote(results));
    EXPECT_NE(typo.exit_code, 0);
    EXPECT_NE(typo.err.find("unknown key slurm.partiton (did you mean partition?)"), std::string::npos) << typo.err;
}

}  // namespace
