// tests/report/test_report_tasks.cpp: `kascade report` on long-context task runs made by the real `kascade task`
// CLI: the needle heatmaps and score-vs-density figures decode and hold the per-cell means of the stored samples,
// the task table's numbers equal averages computed here with sqlite3 from task_samples, the page renders in
// headless Chromium, the selection rule (--where for runs, --task-where for task samples) holds, and a folder with
// nothing to show writes nothing. The figure builders are also checked on hand-made task runs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <tuple>

#include <fmt/format.h>

#include "common/shared_files.h"
#include "io/store/results_db.h"
#include "pipeline/report/report_task_figures.h"
#include "report_check.h"

namespace {

using kascade::test::kStoriesBin;
using kascade::test::kStoriesText;
using kascade::test::kStoriesTok;
// stories260K does not retrieve (it scores 0 everywhere); the project's retrieval fixture does, and StreamingLLM
// under it finds only the needles in its window, so the folder holds scores of 0, 1 and in between.
using kascade::test::kRetrievalModel;

const fs::path kTaskResults = kBuildDir / "tests" / "report-tasks" / "results";
/// The heatmap datablocks hold 6 significant digits.
constexpr double kDatablockPrecision = 1e-5;

/// Passkey prompts at two lengths and three needle depths (0, 50, 100 %), one sample each: seconds in all.
const std::vector<std::string> kTaskCommands = {
    "--model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) +
        " --task passkey --lengths 192,256 --depths 3 --samples 1 --method dense",
    "--model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) +
        " --task passkey --lengths 192,256 --depths 3 --samples 1 --method oracle --topk-pct 50 --k-min 16",
    "--model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) +
        " --task passkey --lengths 192,256 --depths 3 --samples 1 --method oracle --topk-pct 50 --k-min 16 "
        "--prefill dense",
    "--model " + shell_quote(kRetrievalModel) +
        " --task passkey --lengths 256,384 --depths 3 --samples 1 --method dense",
    "--model " + shell_quote(kRetrievalModel) +
        " --task passkey --lengths 256,384 --depths 3 --samples 1 --method streaming --topk-pct 25 --k-min 32",
};

/// Runs the task commands into `results` (the caller holds its lock); "" or what failed.
std::string run_task_commands(const fs::path& results) {
    for (const std::string& args : kTaskCommands) {
        const CommandResult r = run_kascade("task --results " + shell_quote(results.string()) + " " + args);
        if (r.exit_code != 0) return "kascade task " + args + " failed (" + std::to_string(r.exit_code) + "): " + r.err;
    }
    return "";
}

/// The task results shared by the test processes of this file: filled under the folder's lock; `kascade task` reuses
/// stored samples, so only the first process computes.
std::string shared_task_results() {
    const SharedResultsLock lock(kTaskResults);
    return run_task_commands(kTaskResults);
}

/// The rows of datablock `name` in a gnuplot script, each split on whitespace.
std::vector<std::vector<std::string>> datablock_rows(const std::string& script, const std::string& name) {
    std::vector<std::vector<std::string>> rows;
    const size_t start = script.find("$" + name + " << EOD\n");
    if (start == std::string::npos) return rows;
    std::istringstream in(script.substr(script.find('\n', start) + 1));
    std::string line;
    while (std::getline(in, line) && line != "EOD") {
        std::istringstream words(line);
        std::vector<std::string> row;
        for (std::string w; words >> w;) row.push_back(w);
        if (!row.empty()) rows.push_back(row);
    }
    return rows;
}

class TaskReport : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { setup_error_ = new std::string(shared_task_results()); }
    static void TearDownTestSuite() {
        delete setup_error_;
        setup_error_ = nullptr;
    }
    void SetUp() override { ASSERT_EQ(*setup_error_, ""); }

    CommandResult report(const fs::path& results, const std::string& args) {
        return run_kascade("report --results " + shell_quote(results.string()) + " --out " + shell_quote(out_) + " " +
                           args);
    }
    std::vector<std::vector<std::string>> sql(const std::string& query) {
        return db_rows(kTaskResults / "kascade.db", query);
    }

    static std::string* setup_error_;
    TempDir dir_{"report-tasks"};
    fs::path out_ = dir_ / "report";
};
std::string* TaskReport::setup_error_ = nullptr;

TEST_F(TaskReport, TaskOnlyFolderGivesHeatmapsAndScoreVsDensityFigures) {
    const CommandResult r = report(kTaskResults, "");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string n_task_runs = sql("SELECT count(*) FROM task_runs")[0][0];
    EXPECT_NE(r.out.find("(0 runs, " + n_task_runs + " task runs"), std::string::npos) << r.out;
    // One heatmap and one score-vs-density figure per model x task x haystack.
    const std::string n_groups =
        sql("SELECT count(*) FROM (SELECT DISTINCT model_hash, task, haystack_path FROM task_samples_flat)")[0][0];
    ASSERT_EQ(n_groups, "2");

    const std::string html = read_all(out_ / "index.html");
    const std::vector<ImageRef> images = html_images(html);
    ASSERT_EQ(images.size(), 4u) << html;
    std::set<std::string> names;
    for (const ImageRef& img : images) {
        SCOPED_TRACE(img.src);
        names.insert(img.src);
        const DecodedImage png = decode_png(out_ / img.src);
        ASSERT_EQ(png.error, "");
        EXPECT_EQ(png.width, img.width);
        EXPECT_EQ(png.height, img.height);
        EXPECT_GT(png.distinct_colours, 2);
        const fs::path svg_file = out_ / (img.src.substr(0, img.src.size() - 4) + ".svg");
        EXPECT_NE(html.find("href=\"" + svg_file.filename().string() + "\""), std::string::npos);
        const DecodedImage svg = inspect_svg(svg_file);
        ASSERT_EQ(svg.error, "");
        EXPECT_EQ(svg.width, img.width);
        EXPECT_EQ(svg.height, img.height);
        EXPECT_GT(svg.distinct_colours, 2);
    }
    EXPECT_EQ(names,
              (std::set<std::string>{"needle-1.png", "needle-2.png", "task-density-1.png", "task-density-2.png"}));
    // Perplexity-run sections and tables have nothing to show.
    EXPECT_EQ(html.find("id=\"table\""), std::string::npos);
    EXPECT_NE(html.find("id=\"task-table\""), std::string::npos);
}

TEST_F(TaskReport, HeatmapCellsAreTheMeanScoresOfTheStoredSamples) {
    ASSERT_EQ(report(kTaskResults, "").exit_code, 0);
    for (const char* figure : {"needle-1", "needle-2"}) {
        SCOPED_TRACE(figure);
        const std::string script = read_all(out_ / "gnuplot" / (std::string(figure) + ".gp"));
        const bool retrieval = script.find("retrieval-model") != std::string::npos;
        const std::string model = retrieval ? "%retrieval-model%" : "%stories260K%";
        // Independently: cell (length index, depth index) -> (mean score, samples) per task run, from task_samples.
        std::map<std::string, int> length_index, depth_index;
        for (const auto& row : sql("SELECT DISTINCT length FROM task_samples_flat WHERE model_path LIKE '" + model +
                                   "' ORDER BY length")) {
            const int next = static_cast<int>(length_index.size());
            length_index[row[0]] = next;
        }
        for (const auto& row : sql("SELECT DISTINCT depth_pct FROM task_samples_flat WHERE model_path LIKE '" + model +
                                   "' ORDER BY depth_pct")) {
            const int next = static_cast<int>(depth_index.size());
            depth_index[row[0]] = next;
        }
        using Cell = std::tuple<int, int, int, double>;  // x, y, samples, mean score
        std::vector<Cell> expected, drawn;
        for (const auto& row :
             sql("SELECT length, depth_pct, count(*), avg(s.score) FROM task_samples s JOIN task_runs "
                 "r ON r.id = s.task_run_id JOIN models m ON m.id = r.model_id WHERE m.path LIKE '" +
                 model + "' GROUP BY s.task_run_id, length, depth_pct")) {
            expected.emplace_back(length_index.at(row[0]), depth_index.at(row[1]), std::stoi(row[2]),
                                  std::stod(row[3]));
        }
        for (int p = 0;; ++p) {
            const auto rows = datablock_rows(script, fmt::format("p{}", p));
            if (rows.empty()) break;
            for (const auto& row : rows)
                drawn.emplace_back(std::stoi(row[0]), std::stoi(row[1]), std::stoi(row[3]), std::stod(row[2]));
        }
        ASSERT_EQ(drawn.size(), expected.size());
        std::sort(expected.begin(), expected.end());
        std::sort(drawn.begin(), drawn.end());
        for (size_t i = 0; i < drawn.size(); ++i) {
            EXPECT_EQ(std::get<0>(drawn[i]), std::get<0>(expected[i])) << i;
            EXPECT_EQ(std::get<1>(drawn[i]), std::get<1>(expected[i])) << i;
            EXPECT_EQ(std::get<2>(drawn[i]), std::get<2>(expected[i])) << i;
            EXPECT_NEAR(std::get<3>(drawn[i]), std::get<3>(expected[i]), kDatablockPrecision) << i;
        }
        // The picture shows it: score-1 cells are drawn in the palette's green end, score-0 cells in its red end
        // (the colour box holds a few pixels of each). The retrieval model's dense run finds every needle.
        const fs::path png = out_ / (std::string(figure) + ".png");
        constexpr std::uint32_t kGreen = 0x1a9850, kRed = 0xd73027;
        constexpr long kCellPixels = 2000;
        if (retrieval) {
            EXPECT_GT(count_pixels(png, kGreen), kCellPixels);
        } else {
            EXPECT_LT(count_pixels(png, kGreen), kCellPixels) << "stories260K finds no needle";
            EXPECT_GT(count_pixels(png, kRed), kCellPixels);
        }
    }
}

TEST_F(TaskReport, TableMeanScoresEqualAveragesOfTheSampleRows) {
    ASSERT_EQ(report(kTaskResults, "").exit_code, 0);
    const auto table = html_table(read_all(out_ / "index.html"), "task-runs");
    ASSERT_EQ(std::to_string(table.size()), sql("SELECT count(*) FROM task_runs")[0][0]);
    std::set<std::string> means;
    for (const auto& row : table) {
        const std::string id = row.at("task run");
        SCOPED_TRACE("task run " + id);
        const auto run =
            sql("SELECT method, prefill, count(*), avg(score), avg(density) FROM task_samples s JOIN "
                "task_runs r ON r.id = s.task_run_id WHERE r.id = " +
                id)[0];
        EXPECT_EQ(row.at("method"), run[0]);
        EXPECT_EQ(row.at("prefill"), run[1]);
        EXPECT_EQ(row.at("samples"), run[2]);
        EXPECT_NEAR(std::stod(row.at("mean score")), std::stod(run[3]), kTablePrecision);
        EXPECT_NEAR(std::stod(row.at("density")), std::stod(run[4]), kTablePrecision);
        means.insert(row.at("mean score"));
        std::map<std::string, std::string> by_length;
        for (const auto& l :
             sql("SELECT length, avg(score) FROM task_samples WHERE task_run_id = " + id + " GROUP BY length"))
            by_length[l[0]] = l[1];
        for (const auto& [column, value] : row) {
            if (!column.starts_with("score at ")) continue;
            const std::string length = column.substr(9, column.find(' ', 9) - 9);
            SCOPED_TRACE(column);
            if (!by_length.count(length)) {
                EXPECT_EQ(value, "");
                continue;
            }
            EXPECT_NEAR(std::stod(value), std::stod(by_length.at(length)), kTablePrecision);
        }
    }
    // A check that means something: runs that find every needle, none, and some.
    EXPECT_GE(means.size(), 3u) << "every task run has the same mean score";
}

TEST_F(TaskReport, PageRefersOnlyToFilesThatExistAndChromiumRendersIt) {
    ASSERT_EQ(report(kTaskResults, "").exit_code, 0);
    const std::vector<std::string> refs = html_references(read_all(out_ / "index.html"));
    ASSERT_GE(refs.size(), 12u);  // each figure: img, its SVG link twice, its script
    for (const std::string& ref : refs) {
        EXPECT_EQ(ref.find("://"), std::string::npos) << ref;
        EXPECT_TRUE(fs::exists(out_ / ref)) << ref;
    }
    const std::optional<fs::path> chromium = find_on_path("chromium");
    if (!chromium) GTEST_SKIP() << "chromium is not installed (Debian package chromium; scripts/setup.sh installs it)";
    const fs::path shot = dir_ / "screenshot.png";
    const int code = chromium_screenshot(*chromium, out_ / "index.html", shot, dir_.path(), dir_ / "chromium.log");
    ASSERT_EQ(code, 0) << read_all(dir_ / "chromium.log");
    const DecodedImage png = decode_png(shot);
    ASSERT_EQ(png.error, "");
    EXPECT_EQ(png.width, 1280);
    EXPECT_EQ(png.height, 1600);
    EXPECT_GT(png.distinct_colours, 2);
    // The first heatmap is on the first screen: its cells' colours are in the screenshot.
    EXPECT_GT(count_pixels(shot, 0xd73027) + count_pixels(shot, 0x1a9850), 1000);
}

TEST_F(TaskReport, TaskWhereSelectsSamples) {
    const std::string condition = "length = 256 AND method != 'streaming'";
    const CommandResult r = report(kTaskResults, "--task-where \"" + condition + "\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto table = html_table(read_all(out_ / "index.html"), "task-runs");
    ASSERT_EQ(std::to_string(table.size()),
              sql("SELECT count(DISTINCT task_run_id) FROM task_samples_flat WHERE " + condition)[0][0]);
    for (const auto& row : table) {
        SCOPED_TRACE("task run " + row.at("task run"));
        const auto selected =
            sql("SELECT count(*), avg(score) FROM task_samples_flat WHERE task_run_id = " + row.at("task run") +
                " AND " + condition)[0];
        EXPECT_EQ(row.at("samples"), selected[0]);
        EXPECT_NEAR(std::stod(row.at("mean score")), std::stod(selected[1]), kTablePrecision);
        EXPECT_NE(row.at("method"), "streaming");
        EXPECT_EQ(row.count("score at 192 tokens"), 0u) << "a length the selection has no sample of";
    }
    EXPECT_NE(read_all(out_ / "index.html").find(condition.substr(0, 12)), std::string::npos);
}

TEST_F(TaskReport, WhereSelectsRunsOnlyTaskWhereTaskRunsOnlyNeitherBoth) {
    // A folder with both kinds: the task results and one perplexity run.
    const fs::path results = dir_ / "results";
    fs::create_directories(results);
    ASSERT_TRUE(copy_database(kTaskResults / "kascade.db", results / "kascade.db"));
    const CommandResult eval =
        run_kascade("eval --results " + shell_quote(results.string()) + " --model " + shell_quote(kStoriesBin) +
                    " --tokenizer " + shell_quote(kStoriesTok) + " --text " + shell_quote(kStoriesText) +
                    " --method oracle --topk-pct 50 --k-min 16 --ctx 128 --eval-tokens 254");
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    const std::string n_runs = db_rows(results / "kascade.db", "SELECT count(*) FROM runs")[0][0];
    const std::string n_task_runs = db_rows(results / "kascade.db", "SELECT count(*) FROM task_runs")[0][0];
    ASSERT_NE(n_runs, "0");

    CommandResult r = report(results, "");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(" + n_runs + " runs, " + n_task_runs + " task runs"), std::string::npos) << r.out;
    std::string html = read_all(out_ / "index.html");
    EXPECT_NE(html.find("id=\"table\""), std::string::npos);
    EXPECT_NE(html.find("id=\"task-table\""), std::string::npos);

    r = report(results, "--where \"method = 'oracle'\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(", 0 task runs"), std::string::npos) << r.out;
    html = read_all(out_ / "index.html");
    EXPECT_EQ(html.find("needle-"), std::string::npos);
    EXPECT_EQ(html.find("id=\"task-table\""), std::string::npos);

    r = report(results, "--task-where \"method = 'dense'\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(0 runs, 2 task runs"), std::string::npos) << r.out;
    html = read_all(out_ / "index.html");
    EXPECT_EQ(html.find("id=\"table\""), std::string::npos);
    EXPECT_EQ(html.find("pareto-"), std::string::npos);

    r = report(results, "--where \"method = 'oracle'\" --task-where \"method = 'dense'\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string n_oracle =
        db_rows(results / "kascade.db", "SELECT count(*) FROM runs WHERE method = 'oracle'")[0][0];
    EXPECT_NE(r.out.find("(" + n_oracle + " runs, 2 task runs"), std::string::npos) << r.out;
}

TEST_F(TaskReport, SweepSelectsItsTaskRuns) {
    // A sweep with task jobs and no [test] table (no perplexity evals), and a task run of the same folder that is
    // not the sweep's.
    const fs::path results = dir_ / "results";
    const fs::path sweep_file = dir_ / "tasks.toml";
    std::ofstream(sweep_file) << "# report test: a sweep of task jobs only\n[model]\npath = \"" << kStoriesBin.string()
                              << "\"\ntokenizer = \"" << kStoriesTok.string() << "\"\n[text]\npath = \""
                              << kStoriesText.string()
                              << "\"\n[calibration]\noffset = 0\ntokens = 381\n[grid]\nctx = [128]\ntile = [16]\n"
                                 "topk_pct = [50]\nk_min = [16]\n[baselines]\nmethods = [\"dense\", \"oracle\"]\n"
                                 "[task]\ntasks = [\"passkey\"]\nlengths = [192]\ndepths = 2\n";
    const CommandResult sweep =
        run_kascade("sweep " + shell_quote(sweep_file.string()) + " --results " + shell_quote(results.string()));
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
    const CommandResult other = run_kascade(
        "task --results " + shell_quote(results.string()) + " --model " + shell_quote(kStoriesBin) + " --tokenizer " +
        shell_quote(kStoriesTok) + " --task passkey --lengths 192 --depths 2 --method streaming --topk-pct 50");
    ASSERT_EQ(other.exit_code, 0) << other.err;

    const CommandResult r = report(results, "--sweep " + shell_quote(sweep_file.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("(0 runs, 2 task runs"), std::string::npos) << r.out;
    std::set<std::string> methods;
    for (const auto& row : html_table(read_all(out_ / "index.html"), "task-runs")) methods.insert(row.at("method"));
    EXPECT_EQ(methods, (std::set<std::string>{"dense", "oracle"}));
}

// Nothing to show: no report, no partial folder, one line saying why.
class TaskReportRefused : public ::testing::Test {
  protected:
    CommandResult report(const fs::path& results, const std::string& args) {
        return run_kascade("report --results " + shell_quote(results.string()) + " --out " + shell_quote(out_) + " " +
                           args);
    }
    void expect_nothing_written() {
        EXPECT_FALSE(fs::exists(out_));
        for (const auto& e : fs::directory_iterator(dir_.path()))
            EXPECT_EQ(e.path().filename().string().find(".partial-"), std::string::npos) << e.path();
    }
    TempDir dir_{"report-tasks-refused"};
    fs::path out_ = dir_ / "report";
};

TEST_F(TaskReportRefused, FolderWithNeitherRunsNorTaskRuns) {
    const fs::path results = dir_ / "results";
    { kascade::ResultsDb create(results); }
    const CommandResult r = report(results, "");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("holds no run and no task run; no report written"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find((results / "kascade.db").string()), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    expect_nothing_written();
}

TEST_F(TaskReportRefused, TaskWhereThatMatchesNothingOrIsInvalid) {
    const fs::path results = dir_ / "results";
    { kascade::ResultsDb create(results); }
    CommandResult r = report(results, "--task-where \"task = 'niah_single'\"");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--task-where \"task = 'niah_single'\" matches no task sample"), std::string::npos) << r.err;
    expect_nothing_written();
    r = report(results, "--task-where \"no_such_column > 1\"");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--task-where \"no_such_column > 1\""), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no_such_column"), std::string::npos) << r.err;
    expect_nothing_written();
}

// ---- The figure builders on hand-made task runs ----

using namespace kascade;

ReportTaskRun make_task_run(std::int64_t id, const std::string& method, const std::string& prefill) {
    ReportTaskRun r;
    r.id = id;
    r.task = "passkey";
    r.metric = "number_match";
    r.method = parse_mode<EvalMethod>(method, "test method");
    r.prefill = r.method == EvalMethod::Dense ? TaskPrefill::Dense : parse_mode<TaskPrefill>(prefill, "test prefill");
    if (r.method != EvalMethod::Dense) {
        r.topk_pct = 10;
        r.k_min = 64;
        r.tile = 16;
    }
    r.model_path = "/m/retrieval-model";
    r.model_hash = "m";
    r.git_commit = "0123456789ab";
    return r;
}

TEST(ReportTaskFigures, LabelsNameMethodBudgetScheduleAndPrefill) {
    ReportTaskRun kascade = make_task_run(1, "kascade", "sparse");
    kascade.schedule_id = 3;
    kascade.policy = SchedulePolicy::Dp;
    kascade.n_anchors = 2;
    EXPECT_EQ(task_run_label(kascade), "kascade dp anchors=2 topk 10% (sparse prefill)");
    kascade.policy = SchedulePolicy::Threshold;
    kascade.threshold = 0.65;
    kascade.max_reuse_dist = 4;
    EXPECT_EQ(task_run_label(kascade), "kascade threshold 0.65 max dist 4 topk 10% (sparse prefill)");
    EXPECT_EQ(task_run_label(make_task_run(2, "oracle", "dense")), "oracle topk 10% (dense prefill)");
    EXPECT_EQ(task_run_label(make_task_run(3, "dense", "sparse")), "dense");
    ReportTaskRun quest = make_task_run(4, "quest", "dense");
    quest.topk_pct.reset();
    quest.topk_tiles = 4;
    quest.page_size = 16;
    EXPECT_EQ(task_run_label(quest), "quest topk 4 pages of 16 (dense prefill)");
    EXPECT_EQ(task_haystack_name(quest), "filler");
}

TEST(ReportTaskFigures, HeatmapPanelsShareAxesAndMissingCellsStayEmpty) {
    ReportData data;
    // Dense: 2 lengths x 2 depths, 2 samples each; oracle (twice the same configuration, other seeds): 1 length.
    ReportTaskRun dense = make_task_run(1, "dense", "");
    for (std::int64_t length : {1024, 2048}) {
        for (double depth : {0.0, 100.0}) {
            for (int i = 0; i < 2; ++i) dense.samples.push_back({length, depth, i, i == 0 ? 1.0 : 0.0, 1.0});
        }
    }
    ReportTaskRun oracle = make_task_run(2, "oracle", "sparse");
    oracle.samples = {{2048, 0.0, 0, 1.0, 0.2}, {2048, 50.0, 0, 0.0, 0.25}};
    ReportTaskRun oracle_seed = oracle;
    oracle_seed.id = 3;
    oracle_seed.seed = 1;
    data.task_runs = {oracle, dense, oracle_seed};

    const std::vector<ReportFigure> heatmaps = needle_heatmap_figures(data);
    ASSERT_EQ(heatmaps.size(), 1u);
    const std::string script = gnuplot_script(heatmaps[0].plot);
    // Panels in order dense, oracle, oracle; x = index of the length in {1024, 2048}, y = of the depth in {0, 50,
    // 100}; one row per cell with samples: x y mean n.
    EXPECT_EQ(datablock_rows(script, "p0").size(), 4u);
    EXPECT_EQ(datablock_rows(script, "p0")[0], (std::vector<std::string>{"0", "0", "0.5", "2"}));
    EXPECT_EQ(datablock_rows(script, "p1"),
              (std::vector<std::vector<std::string>>{{"1", "0", "1", "1"}, {"1", "1", "0", "1"}}));
    EXPECT_NE(script.find("set xtics (\"1024\" 0, \"2048\" 1)"), std::string::npos) << script;
    EXPECT_NE(script.find("set ytics (\"0\" 0, \"50\" 1, \"100\" 2)"), std::string::npos) << script;
    EXPECT_NE(script.find("oracle topk 10%\\n(sparse prefill) [task run 2]"), std::string::npos) << script;
    EXPECT_NE(script.find("[task run 3]"), std::string::npos) << script;
    EXPECT_NE(script.find("set cbrange [0:1]"), std::string::npos);

    const std::vector<ReportFigure> density = task_density_figures(data);
    ASSERT_EQ(density.size(), 1u);
    const std::string density_script = gnuplot_script(density[0].plot);
    // Panel 0 (all lengths): dense at (1, 0.5), the two oracle runs at (0.225, 0.5); panel 1 (1024): dense only.
    EXPECT_EQ(datablock_rows(density_script, "d0"),
              (std::vector<std::vector<std::string>>{{"1", "0.5"}, {"0.225", "0.5"}, {"0.225", "0.5"}}));
    EXPECT_EQ(datablock_rows(density_script, "d1"), (std::vector<std::vector<std::string>>{{"1", "0.5"}}));
    EXPECT_NE(density_script.find("title \"oracle, sparse prefill\""), std::string::npos) << density_script;

    std::vector<GnuplotFigure> plots = {heatmaps[0].plot, density[0].plot};
    TempDir dir("report-task-figures");
    render_figures(find_gnuplot(), dir.path(), plots);
    for (const GnuplotFigure& p : plots) {
        SCOPED_TRACE(p.name);
        const DecodedImage png = decode_png(dir / (p.name + ".png"));
        ASSERT_EQ(png.error, "");
        EXPECT_EQ(png.width, p.width);
        EXPECT_EQ(png.height, p.height);
        EXPECT_GT(png.distinct_colours, 2);
        EXPECT_EQ(inspect_svg(dir / (p.name + ".svg")).error, "");
    }
}

}  // namespace
