// tests/report/test_report_budget_units.cpp: every method's budget is plotted and labelled in one unit (issue 25,
// class 9). Quest counts pages and the other methods tiles; a report puts both on its axes and point labels as keys
// (pages x page size, tiles x tile), and never calls Quest's page size a tile. Real decode runs and task runs of
// stories260K at the same key budget (2 pages of 16 keys = 2 tiles of 16 keys = 32 keys), drawn by `kascade
// report`; the gnuplot scripts it writes are read back.
#include <gtest/gtest.h>

#include "common/shared_files.h"
#include "report_check.h"

namespace {

using kascade::test::kStoriesBin;
using kascade::test::kStoriesText;
using kascade::test::kStoriesTok;

/// The run id of the only run of `method` (read with plain sqlite3).
std::string run_id(const fs::path& results, const std::string& method) {
    return db_value(results / "kascade.db", "SELECT id FROM runs WHERE method = '" + method + "'");
}

TEST(ReportBudgetUnits, QuestPagesAndTopKTilesShareOneAxisInKeys) {
    TempDir dir("report_units");
    const fs::path results = dir / "results", out = dir / "report";
    const std::string model = " --model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok);
    const std::string decode = model + " --text " + shell_quote(kStoriesText) +
                               " --phase decode --prompt-tokens 64 --decode-tokens 64 --eval-tokens 256";
    for (const std::string method : {"oracle --tile 16", "quest --page-size 16"}) {
        const CommandResult eval =
            run_kascade("eval --results " + shell_quote(results) + decode + " --method " + method + " --topk-tiles 2");
        ASSERT_EQ(eval.exit_code, 0) << method << ": " << eval.err;
        const CommandResult task =
            run_kascade("task --results " + shell_quote(results) + model +
                        " --task passkey --lengths 192 --depths 1 --samples 1 --method " + method + " --topk-tiles 2");
        ASSERT_EQ(task.exit_code, 0) << method << ": " << task.err;
    }
    const CommandResult report = run_kascade("report --results " + shell_quote(results) + " --out " + shell_quote(out));
    ASSERT_EQ(report.exit_code, 0) << report.err;

    // Perplexity vs budget: both methods at x = 32 keys, on an axis that says keys.
    const std::string topk = read_all(out / "gnuplot" / "topk-1.gp");
    const std::vector<std::string> points = datablock_lines(topk, "curves");
    ASSERT_EQ(points.size(), 2u) << topk;
    const std::string oracle = run_id(results, "oracle"), quest = run_id(results, "quest");
    for (const std::string& row : points) {
        EXPECT_EQ(row.substr(0, row.find(' ')), "32") << row << " (run " << row.substr(row.rfind(' ') + 1)
                                                      << "; oracle is " << oracle << ", quest " << quest << ")";
    }
    EXPECT_NE(topk.find("Quest pages x page size"), std::string::npos) << topk;
    EXPECT_NE(topk.find("quest 2 pages of 16"), std::string::npos) << topk;

    // Quest's own run figure names its pages, never a tile (it has none).
    const std::string run = read_all(out / "gnuplot" / ("run-" + quest + ".gp"));
    EXPECT_NE(run.find("top-k 2 pages of 16"), std::string::npos) << run;
    EXPECT_EQ(run.find("tile 0"), std::string::npos) << run;
    EXPECT_EQ(run.find(", tile"), std::string::npos) << run;
    const std::string html = read_all(out / "index.html");
    EXPECT_NE(html.find("<td>2 pages of 16</td>"), std::string::npos);

    // Score vs density: the points are labelled in keys, the same for both methods.
    const std::string density = read_all(out / "gnuplot" / "task-density-1.gp");
    const std::vector<std::string> labels = datablock_lines(density, "l0");
    ASSERT_EQ(labels.size(), 2u) << density;
    for (const std::string& label : labels) EXPECT_NE(label.find("\"32 keys\""), std::string::npos) << label;
}

}  // namespace
