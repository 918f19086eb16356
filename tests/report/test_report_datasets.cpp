// tests/report/test_report_datasets.cpp: `kascade report` on task runs over dataset files (`kascade task --dataset`,
// run here by the real CLI on the retrieval test model, which really answers pass-key prompts): the per-dataset
// score table holds, for each method configuration and dataset, the mean of the stored sample scores computed here
// with sqlite3, and their average; the run table holds each run's samples, cut prompts and means; the score-vs-density
// figure draws each run's means in its dataset's panel; --dataset-where
// selects samples; a folder of dataset runs alone gets a report; a condition that matches nothing writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/shared_files.h"
#include "report_check.h"

namespace {

using kascade::test::kRetrievalModel;
/// Prompts of the model's own training layout with the answers its trainer knew: the pass-key ones are the datasets.
const fs::path kPrompts = kRetrievalModel / "reference_greedy.json";

class DatasetReport : public ::testing::Test {
  protected:
    /// Two LongBench-format datasets of two pass-key prompts each (483 to 921 tokens), each prompt's answer the key
    /// its text hides, and the runs: dense, StreamingLLM at a window that misses most needles, and dense again with
    /// prompts cut in the middle to 400 tokens (the question is kept, the needle may be cut away).
    void SetUp() override {
        const nlohmann::json prompts = nlohmann::json::parse(read_all(kPrompts));
        std::vector<std::pair<std::string, std::string>> passkey;  // prompt, key
        for (const nlohmann::json& s : prompts.at("samples")) {
            const std::string prompt = s.at("prompt");
            std::smatch key;
            if (s.at("prompt_tokens").get<int>() < 1000 &&
                std::regex_search(prompt, key, std::regex("The pass key is ([0-9]+)\\.")))
                passkey.emplace_back(prompt, key[1]);
        }
        ASSERT_GE(passkey.size(), 4u) << kPrompts;
        for (int d = 0; d < 2; ++d) {
            std::string lines;
            for (int i = 0; i < 2; ++i) {
                const auto& [prompt, key] = passkey[static_cast<std::size_t>(2 * d + i)];
                lines += nlohmann::json{{"prompt", prompt}, {"answers", {key}}, {"_id", key}}.dump() + "\n";
            }
            dir_.write(kDatasets[d] + std::string(".jsonl"), lines);
        }
        dir_.write("dataset2maxlen.json", "{\"keys_a\": 8, \"keys_b\": 8}");
        for (const char* dataset : kDatasets) {
            for (const char* method :
                 {"--method dense", "--method streaming --topk-pct 10 --k-min 32", "--method dense --max-length 400"}) {
                const CommandResult r =
                    run_kascade("task --results " + shell_quote(results_) + " --model " + shell_quote(kRetrievalModel) +
                                " --dataset " + shell_quote(dir_ / (dataset + std::string(".jsonl"))) +
                                " --dataset-name " + dataset + " --maxlen-file " +
                                shell_quote(dir_ / "dataset2maxlen.json") + " --metric qa_f1_score " + method);
                ASSERT_EQ(r.exit_code, 0) << method << ": " << r.err;
            }
        }
    }

    CommandResult report(const std::string& args) {
        return run_kascade("report --results " + shell_quote(results_) + " --out " + shell_quote(out_) + " " + args);
    }
    std::vector<std::vector<std::string>> sql(const std::string& query) {
        return db_rows(results_ / "kascade.db", query);
    }

    static constexpr const char* kDatasets[] = {"keys_a", "keys_b"};
    TempDir dir_{"report-datasets"};
    fs::path results_ = dir_ / "results";
    fs::path out_ = dir_ / "report";
};

TEST_F(DatasetReport, ScoreTableHoldsTheMeanOfEachConfigurationOnEachDataset) {
    const CommandResult r = report("");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(0 runs, 0 task runs, 6 dataset runs"), std::string::npos) << r.out;
    const auto table = html_table(read_all(out_ / "index.html"), "dataset-scores");
    // One row per configuration (dense, streaming, dense cut to 400 tokens), a column per dataset.
    ASSERT_EQ(table.size(), 3u);
    std::set<std::string> scores;
    for (const auto& row : table) {
        const std::string max_length = row.at("max length");
        SCOPED_TRACE(row.at("method") + " " + row.at("budget") + " max length " + max_length);
        double sum = 0;
        for (const char* dataset : kDatasets) {
            const auto expected = sql("SELECT avg(score) FROM dataset_samples_flat WHERE method = '" +
                                      row.at("method") + "' AND dataset_name = '" + dataset + "' AND max_length " +
                                      (row.at("max length") == "400" ? "= 400" : "> 400"))[0][0];
            EXPECT_NEAR(std::stod(row.at(dataset)), std::stod(expected), kTablePrecision) << dataset;
            sum += std::stod(expected);
            scores.insert(row.at(dataset));
        }
        EXPECT_NEAR(std::stod(row.at("average")), sum / 2, kTablePrecision);
    }
    // Dense answers every prompt; the others lose some needles, so the check compares different numbers.
    for (const auto& row : table) {
        if (row.at("method") == "dense" && row.at("max length") != "400") {
            EXPECT_EQ(row.at("keys_a"), "1.0000");
            EXPECT_EQ(row.at("keys_b"), "1.0000");
        }
    }
    EXPECT_GE(scores.size(), 2u) << "every configuration has the same score";
}

TEST_F(DatasetReport, RunTableCountsSamplesAndCutPromptsOfEachRun) {
    ASSERT_EQ(report("").exit_code, 0);
    const auto table = html_table(read_all(out_ / "index.html"), "dataset-runs");
    ASSERT_EQ(std::to_string(table.size()), sql("SELECT count(*) FROM task_runs")[0][0]);
    for (const auto& row : table) {
        SCOPED_TRACE("task run " + row.at("task run"));
        const auto run =
            sql("SELECT dataset_name, metric, method, count(*), sum(cut_at IS NOT NULL), avg(score), avg(density), "
                "max_length, chat_template FROM dataset_samples_flat WHERE task_run_id = " +
                row.at("task run"))[0];
        EXPECT_EQ(row.at("dataset"), run[0]);
        EXPECT_EQ(row.at("metric"), run[1]);
        EXPECT_EQ(row.at("method"), run[2]);
        EXPECT_EQ(row.at("samples"), run[3]);
        EXPECT_EQ(row.at("cut"), run[4]);
        // Cut to 400 tokens, every prompt (483 to 921 tokens) is cut; uncut runs keep theirs.
        EXPECT_EQ(row.at("cut"), row.at("max length") == "400" ? "2" : "0");
        EXPECT_NEAR(std::stod(row.at("mean score")), std::stod(run[5]), kTablePrecision);
        EXPECT_NEAR(std::stod(row.at("density")), std::stod(run[6]), kTablePrecision);
        EXPECT_EQ(row.at("max length"), run[7]);
        EXPECT_EQ(row.at("chat template"), run[8]);
        EXPECT_EQ(row.at("file"), run[0] + ".jsonl");
    }
}

TEST_F(DatasetReport, DensityFigureHasAPanelPerDatasetWithEachRunsMeanScoreAndDensity) {
    ASSERT_EQ(report("").exit_code, 0);
    const std::string html = read_all(out_ / "index.html");
    EXPECT_NE(html.find("<h2 id=\"dataset-density\">"), std::string::npos);
    EXPECT_NE(html.find("<figure id=\"dataset-density-1\">"), std::string::npos);
    EXPECT_EQ(html.find("dataset-density-2"), std::string::npos);  // one model, one chat template
    const std::string script = read_all(out_ / "gnuplot" / "dataset-density-1.gp");
    // Panel p (datablock d<p>) is dataset kDatasets[p]: its points are (mean density, mean score) of every run on it.
    for (int p = 0; p < 2; ++p) {
        SCOPED_TRACE(kDatasets[p]);
        std::vector<std::pair<double, double>> drawn;
        for (const std::string& line : datablock_lines(script, "d" + std::to_string(p))) {
            std::istringstream in(line);
            double x = 0, y = 0;
            ASSERT_TRUE(in >> x >> y) << line;
            drawn.emplace_back(x, y);
        }
        std::vector<std::pair<double, double>> stored;
        for (const auto& row : sql(std::string("SELECT avg(density), avg(score) FROM dataset_samples_flat WHERE "
                                               "dataset_name = '") +
                                   kDatasets[p] + "' GROUP BY task_run_id"))
            stored.emplace_back(std::stod(row[0]), std::stod(row[1]));
        ASSERT_EQ(drawn.size(), stored.size());
        std::sort(drawn.begin(), drawn.end());
        std::sort(stored.begin(), stored.end());
        for (size_t i = 0; i < drawn.size(); ++i) {
            EXPECT_NEAR(drawn[i].first, stored[i].first, 1e-5 * stored[i].first) << i;
            EXPECT_NEAR(drawn[i].second, stored[i].second, 1e-5) << i;
        }
        EXPECT_NE(script.find("set title \"" + std::string(kDatasets[p]) + " (qa_f1_score)\""), std::string::npos);
    }
    for (const auto& image : {"dataset-density-1.svg", "dataset-density-1.png"})
        EXPECT_TRUE(fs::exists(out_ / image)) << image;
}

TEST_F(DatasetReport, DatasetWhereSelectsSamplesAndOtherConditionsLeaveThemOut) {
    CommandResult r = report("--dataset-where \"dataset_name = 'keys_b' AND method = 'dense'\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto table = html_table(read_all(out_ / "index.html"), "dataset-scores");
    ASSERT_EQ(table.size(), 2u);  // dense uncut and cut
    for (const auto& row : table) {
        EXPECT_EQ(row.count("keys_a"), 0u);
        EXPECT_EQ(row.at("method"), "dense");
    }

    // Another kind's condition leaves the dataset runs out: this folder has no task samples, so it is refused and
    // nothing is written.
    fs::remove_all(out_);
    r = report("--task-where \"1\"");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--task-where \"1\" matches no task sample"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out_));

    r = report("--dataset-where \"dataset_name = 'hotpotqa'\"");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("--dataset-where \"dataset_name = 'hotpotqa'\" matches no dataset sample"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out_));

    r = report("--dataset-where \"no_such_column = 1\"");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("no_such_column"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out_));
    for (const auto& e : fs::directory_iterator(dir_.path()))
        EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
}

}  // namespace
