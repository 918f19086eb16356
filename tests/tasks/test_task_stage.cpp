// The task stage end to end on stories260K (a real Llama; it does not retrieve, so answers are compared, not
// scored): every method at a budget covering the whole context answers exactly as dense does, with sparse and dense
// prefill; samples answered in batches store the rows of samples answered one at a time; a run killed with SIGKILL
// resumes to the rows of an uninterrupted run; bad options write nothing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "../pipeline/sweep_fixture.h"

namespace {

/// The columns that say what a sample is and what the model answered (not when or how fast).
const std::string kSampleColumns =
    "length, depth_pct, sample_index, printf('%.9f', needle_depth), expected_json, generated, score, "
    "generated_tokens, printf('%.9f', density)";

class TaskStage : public ::testing::Test {
  protected:
    TempDir dir_{"task_stage"};
    fs::path results_ = dir_ / "results";

    CommandResult task(const std::string& args, const fs::path& results) {
        return run_kascade("task --results " + shell_quote(results) + " --model " + shell_quote(kStoriesBin) +
                           " --tokenizer " + shell_quote(kStoriesTok) + " " + args);
    }
    CommandResult task_json(const std::string& task_name, const std::string& grid, const std::string& method) {
        return task(" --task " + task_name + grid + method + " --json", results_);
    }
    std::vector<std::vector<std::string>> samples(const fs::path& results, const std::string& where) {
        return db_rows(results / "kascade.db", "SELECT " + kSampleColumns + " FROM task_samples_flat WHERE " + where +
                                                   " ORDER BY length, depth_pct, sample_index");
    }
};

TEST_F(TaskStage, EveryMethodAtAFullBudgetAnswersAsDense) {
    // A Kascade schedule: capture on TinyStories text, similarity, anchors 0 and 2.
    const CommandResult capture =
        run_kascade("capture --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) +
                    " --tokenizer " + shell_quote(kStoriesTok) + " --text " + shell_quote(kStoriesText) +
                    " --calib-tokens 1022 --ctx 512 --tile 16 --save-qk");
    ASSERT_EQ(capture.exit_code, 0) << capture.err;
    const std::string capture_key = db_value(results_ / "kascade.db", "SELECT artifact_key FROM captures");
    const CommandResult similarity =
        run_kascade("similarity --results " + shell_quote(results_) + " --capture " + capture_key + " --topk-tiles 8");
    ASSERT_EQ(similarity.exit_code, 0) << similarity.err;
    const std::string similarity_key = db_value(results_ / "kascade.db", "SELECT artifact_key FROM similarities");
    const CommandResult schedule = run_kascade("schedule --results " + shell_quote(results_) + " --similarity " +
                                               similarity_key + " --policy fixed --anchor-list 0,2");
    ASSERT_EQ(schedule.exit_code, 0) << schedule.err;
    const std::string schedule_id = db_value(results_ / "kascade.db", "SELECT max(id) FROM schedules");

    const std::string grid = " --lengths 400,480 --depth-pcts 0,50,100 --samples 1";
    // 4096 tiles or pages cover any prompt here: every key of the context is selected.
    const std::string full = " --topk-tiles 4096";
    for (const std::string task : {"passkey", "niah_multikey"}) {
        SCOPED_TRACE(task);
        ASSERT_EQ(task_json(task, grid, " --method dense").exit_code, 0);
        const auto dense = samples(results_, "method = 'dense' AND task = '" + task + "'");
        ASSERT_EQ(dense.size(), 6u);
        const std::vector<std::string> methods = {" --method oracle",
                                                  " --method streaming",
                                                  " --method quest",
                                                  " --method omnikv --filter-layers 2",
                                                  " --method lessismore --selection-layers 2",
                                                  " --schedule " + schedule_id,
                                                  " --method oracle --prefill dense"};
        for (const std::string& method : methods) {
            SCOPED_TRACE(method);
            const CommandResult r = task_json(task, grid, method + full);
            ASSERT_EQ(r.exit_code, 0) << r.err;
            const int64_t id = nlohmann::json::parse(r.out).at("task_run_id").get<int64_t>();
            auto rows = samples(results_, "task_run_id = " + std::to_string(id));
            ASSERT_EQ(rows.size(), dense.size());
            for (size_t i = 0; i < rows.size(); ++i) {
                // Everything but the density (1 for dense; the selected share for the others: all keys here).
                for (size_t c = 0; c + 1 < rows[i].size(); ++c) EXPECT_EQ(rows[i][c], dense[i][c]) << i << " " << c;
            }
        }
    }
}

TEST_F(TaskStage, KilledRunResumesToTheRowsOfAnUninterruptedRun) {
    // 96 samples of 10-100 milliseconds each: the kill lands mid-run.
    const std::string args =
        " --task niah_multikey --lengths 400,480 --depths 6 --samples 8 --method oracle --topk-pct 10 --k-min 32";
    const fs::path whole = dir_ / "whole";
    ASSERT_EQ(task(args, whole).exit_code, 0);

    // Start the same run, SIGKILL it once some samples are stored, then run the command again.
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        const std::string cmd = shell_quote(KASCADE_BIN) + " task --results " + shell_quote(results_) + " --model " +
                                shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) + args +
                                " >/dev/null 2>&1";
        ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    int stored = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (fs::exists(results_ / "kascade.db")) {
            // Until the database and its tables exist, the query fails.
            const auto rows = try_db_rows(results_ / "kascade.db", "SELECT count(*) FROM task_samples");
            if (rows && !rows->empty()) stored = std::stoi(rows->front()[0]);
        }
        if (stored >= 3) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it was killed (" << stored << " samples)";
    const int at_kill = std::stoi(db_value(results_ / "kascade.db", "SELECT count(*) FROM task_samples"));
    EXPECT_LT(at_kill, 96);

    const CommandResult resumed = task(args + " --json", results_);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const nlohmann::json j = nlohmann::json::parse(resumed.out);
    EXPECT_EQ(j.at("samples_stored").get<int>(), at_kill);
    EXPECT_EQ(j.at("samples_run").get<int>(), 96 - at_kill);
    EXPECT_EQ(samples(results_, "1"), samples(whole, "1"));
    EXPECT_EQ(db_value(results_ / "kascade.db", "SELECT count(*) FROM task_runs"), "1");
}

TEST_F(TaskStage, BatchedSamplesAnswerAsSamplesRunOneAtATime) {
    // Six samples in batches of four (the last batch two): every method stores the rows a run of one sample at a time
    // stores, its answers and densities included, at a budget that does not cover the context (the selections
    // differ per sample and step). The batch is not part of the run: the same command at another batch reads it.
    const std::string grid = " --task niah_multikey --lengths 400,480 --depth-pcts 0,50,100 --samples 1";
    const std::vector<std::string> methods = {" --method dense",
                                              " --method oracle --topk-tiles 6",
                                              " --method streaming --topk-tiles 6",
                                              " --method quest --topk-tiles 6",
                                              " --method omnikv --filter-layers 2 --topk-tiles 6",
                                              " --method lessismore --selection-layers 2 --topk-tiles 6",
                                              " --method oracle --topk-tiles 6 --prefill dense --kv-dtype bf16"};
    const fs::path alone = dir_ / "alone";
    for (const std::string& method : methods) {
        SCOPED_TRACE(method);
        const CommandResult one = task(grid + method + " --json", alone);
        ASSERT_EQ(one.exit_code, 0) << one.err;
        const CommandResult batched = task(grid + method + " --batch 4 --json", results_);
        ASSERT_EQ(batched.exit_code, 0) << batched.err;
        EXPECT_EQ(nlohmann::json::parse(batched.out).at("samples_run").get<int>(), 6);
        const std::string where = "task_run_key = (SELECT max(key) FROM task_runs WHERE id = " +
                                  std::to_string(nlohmann::json::parse(batched.out).at("task_run_id").get<int64_t>()) +
                                  ")";
        const auto rows = samples(results_, where);
        ASSERT_EQ(rows.size(), 6u);
        EXPECT_EQ(rows, samples(alone, where));
        EXPECT_EQ(db_value(results_ / "kascade.db",
                           "SELECT group_concat(batch, ',') FROM (SELECT batch FROM task_samples_flat WHERE " + where +
                               " ORDER BY length, depth_pct, sample_index)"),
                  "4,4,4,4,2,2");
        EXPECT_EQ(db_value(alone / "kascade.db", "SELECT group_concat(DISTINCT batch) FROM task_samples"), "1");

        const CommandResult again = task(grid + method + " --batch 3 --json", alone);
        ASSERT_EQ(again.exit_code, 0) << again.err;
        EXPECT_EQ(nlohmann::json::parse(again.out).at("samples_run").get<int>(), 0);
    }
}

TEST_F(TaskStage, BadOptionsAreOneLineErrorsThatWriteNothing) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--lengths 400  --task paskey --method dense", "did you mean passkey?"},
        {" --lengths 40 --task niah_multiquery --method dense", "length 40 is too short for task niah_multiquery"},
        {" --lengths 600 --method dense", "invalid length 600 in --lengths"},
        {"--lengths 400  --method oracle", "--method oracle needs a key budget"},
        {"--lengths 400  --method dense --prefill spars", "did you mean sparse?"},
        {"--lengths 400  --method dense --depth-pcts 150", "--depth-pcts 150 is out of range (must be in [0, 100])"},
        {"--lengths 400  --method dense --haystack /nonexistent/hay.txt", "/nonexistent/hay.txt"},
        {"--lengths 400  --method dense --batch 0", "--batch 0 is out of range (must be in [1, 4096])"},
    };
    for (const auto& [args, needle] : cases) {
        SCOPED_TRACE(args);
        const CommandResult r = task(args, results_);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(results_)) << "a failed command left " << results_;
    }
}

}  // namespace
