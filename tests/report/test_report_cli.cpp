// tests/report/test_report_cli.cpp: `kascade report` end to end on the quick sweep of stories260K: every figure is
// a valid, non-blank PNG and SVG of the size the page states, the page refers only to files that exist, a browser
// renders it, and bad input writes nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "io/store/results_db.h"
#include "report_check.h"

namespace {

const fs::path kQuickResults = kBuildDir / "tests" / "report-quick-sweep" / "results";
const std::string kQuickSweep = std::string(KASCADE_SOURCE_DIR) + "/experiments/stories260k-quick.toml";

/// The quick sweep's 22 runs: 1 dense, per top-k in {4, 8, 12}: 5 kascade schedules, oracle, streaming.
constexpr int kQuickRuns = 22;
constexpr int kQuickSchedules = 15;
constexpr int kQuickSimilarities = 3;

/// Sets an environment variable for the commands a test runs, restoring it afterwards.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

class QuickSweepReport : public ::testing::Test {
  protected:
    static void SetUpTestSuite() { sweep_output_ = new std::string(shared_quick_sweep(kQuickResults)); }
    static void TearDownTestSuite() {
        delete sweep_output_;
        sweep_output_ = nullptr;
    }
    void SetUp() override { ASSERT_NE(sweep_output_->find("sweep done"), std::string::npos) << *sweep_output_; }

    CommandResult report(const std::string& args) {
        return run_kascade("report --results " + shell_quote(kQuickResults.string()) + " " + args);
    }

    static std::string* sweep_output_;
    TempDir dir_{"report"};
};
std::string* QuickSweepReport::sweep_output_ = nullptr;

/// Files directly in a folder whose name contains `part` (leftovers of an unfinished report).
int count_named(const fs::path& folder, const std::string& part) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(folder))
        n += e.path().filename().string().find(part) != std::string::npos;
    return n;
}

TEST_F(QuickSweepReport, SweepEndsByPrintingWhereItsReportIs) {
    const fs::path html = kQuickResults / "reports" / "stories260k-quick" / "index.html";
    EXPECT_NE(sweep_output_->find("report: " + html.string()), std::string::npos) << *sweep_output_;
    // Other test processes run the sweep too (and so rewrite the report): hold them off until the check is done.
    const SharedResultsLock lock(kQuickResults);
    ASSERT_TRUE(fs::exists(html));

    const auto written = fs::last_write_time(html);
    const std::string again = run_quick_sweep_locked(kQuickResults, "--no-report");
    EXPECT_NE(again.find("0 jobs computed"), std::string::npos) << again;
    EXPECT_EQ(again.find("report:"), std::string::npos) << again;
    EXPECT_EQ(fs::last_write_time(html), written);
}

TEST_F(QuickSweepReport, EveryFigureIsAValidNonBlankPngAndSvgOfTheStatedSize) {
    const fs::path out = dir_ / "report";
    const CommandResult r = report("--sweep " + shell_quote(kQuickSweep) + " --out " + shell_quote(out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("report: " + (out / "index.html").string()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(" + std::to_string(kQuickRuns) + " runs"), std::string::npos) << r.out;

    const std::string html = read_all(out / "index.html");
    const std::vector<ImageRef> images = html_images(html);
    // pareto + top-k + one per similarity + diagram and head maps per schedule + one per sparse run.
    const size_t expected = 1 + 1 + kQuickSimilarities + 2 * kQuickSchedules + (kQuickRuns - 1);
    ASSERT_EQ(images.size(), expected) << html;
    std::set<std::string> kinds;
    for (const ImageRef& img : images) {
        SCOPED_TRACE(img.src);
        kinds.insert(img.src.substr(0, img.src.find('-')));
        ASSERT_TRUE(img.src.ends_with(".png"));
        const DecodedImage png = decode_png(out / img.src);
        ASSERT_EQ(png.error, "");
        EXPECT_EQ(png.width, img.width);
        EXPECT_EQ(png.height, img.height);
        EXPECT_GT(png.distinct_colours, 2);
        const fs::path svg_file = out / (img.src.substr(0, img.src.size() - 4) + ".svg");
        EXPECT_NE(html.find("href=\"" + svg_file.filename().string() + "\""), std::string::npos);
        const DecodedImage svg = inspect_svg(svg_file);
        ASSERT_EQ(svg.error, "");
        EXPECT_EQ(svg.width, img.width);
        EXPECT_EQ(svg.height, img.height);
        EXPECT_GT(svg.distinct_colours, 2);
    }
    EXPECT_EQ(kinds, (std::set<std::string>{"pareto", "topk", "similarity", "schedule", "headmap", "run"}));
    // Every plot names the build that made its results.
    const std::string commit = db_value(kQuickResults / "kascade.db", "SELECT git_commit FROM runs LIMIT 1");
    ASSERT_FALSE(commit.empty());
    for (const char* name : {"pareto-1.svg", "topk-1.svg"}) {
        EXPECT_NE(read_all(out / name).find("kascade " + commit), std::string::npos) << name;
    }
}

TEST_F(QuickSweepReport, HtmlRefersOnlyToFilesThatExist) {
    const fs::path out = dir_ / "report";
    const CommandResult r = report("--out " + shell_quote(out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<std::string> refs = html_references(read_all(out / "index.html"));
    ASSERT_GT(refs.size(), 100u);
    for (const std::string& ref : refs) {
        EXPECT_EQ(ref.find("://"), std::string::npos) << ref << ": a self-contained page links nowhere else";
        EXPECT_TRUE(fs::exists(out / ref)) << ref;
    }
    EXPECT_EQ(count_named(dir_.path(), ".partial-"), 0);
}

TEST_F(QuickSweepReport, ChromiumRendersThePage) {
    const std::optional<fs::path> chromium = find_on_path("chromium");
    if (!chromium) GTEST_SKIP() << "chromium is not installed (Debian package chromium; scripts/setup.sh installs it)";
    const fs::path out = dir_ / "report";
    const CommandResult r = report("--where \"method != 'streaming'\" --out " + shell_quote(out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path shot = dir_ / "screenshot.png";
    const int code = chromium_screenshot(*chromium, out / "index.html", shot, dir_.path(), dir_ / "chromium.log");
    ASSERT_EQ(code, 0) << read_all(dir_ / "chromium.log");
    const DecodedImage png = decode_png(shot);
    ASSERT_EQ(png.error, "");
    EXPECT_EQ(png.width, 1280);
    EXPECT_EQ(png.height, 1600);
    // Text, links and the first figures: far more than background and one ink colour.
    EXPECT_GT(png.distinct_colours, 2);
}

TEST_F(QuickSweepReport, KernelBenchRowsGiveASpeedupFigurePerShape) {
    const fs::path results = dir_ / "results";
    fs::create_directories(results);
    // A copy of the quick results plus benchmark rows.
    ASSERT_TRUE(copy_database(kQuickResults / "kascade.db", results / "kascade.db"));
    {
        kascade::ResultsDb db(results);
        for (const auto& [variant, speedups] : std::vector<std::pair<std::string, std::vector<double>>>{
                 {"reuse_10pct", {3.1, 5.2, 7.3}}, {"anchor_10pct", {0.8, 0.85, 0.87}}, {"dense", {0, 0, 0}}}) {
            const int contexts[] = {2048, 4096, 8192};
            for (int i = 0; i < 3; ++i) {
                kascade::KernelBenchRecord row;
                row.name =
                    "prefill/smollm2/T:" + std::to_string(contexts[i]) + "/" + variant + "/min_time:0.200/real_time";
                row.shape_json = "{}";
                row.threads = 2;
                row.time_ms = 1;
                if (variant != "dense") row.speedup = speedups[i];
                row.git_commit = "0123456789ab";
                row.machine = "test machine";
                row.created_at = kascade::utc_now();
                db.insert_kernel_bench(row);
            }
        }
    }
    const fs::path out = dir_ / "report";
    const CommandResult r = run_kascade("report --results " + shell_quote(results.string()) +
                                        " --where \"method = 'oracle'\" --out " + shell_quote(out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const DecodedImage png = decode_png(out / "kernels-1.png");
    ASSERT_EQ(png.error, "");
    EXPECT_GT(png.distinct_colours, 2);
    const std::string script = read_all(out / "gnuplot" / "kernels-1.gp");
    EXPECT_NE(script.find("reuse_10pct"), std::string::npos);
    EXPECT_NE(script.find("8192 7.3"), std::string::npos) << script;
    EXPECT_EQ(script.find("\"dense\""), std::string::npos) << "dense rows have no speed-up to plot";
    EXPECT_FALSE(fs::exists(out / "kernels-2.png"));
}

TEST_F(QuickSweepReport, AnExistingReportIsReplacedWhole) {
    const fs::path out = dir_ / "report";
    ASSERT_EQ(report("--out " + shell_quote(out.string())).exit_code, 0);
    ASSERT_TRUE(fs::exists(out / "run-2.png"));
    const CommandResult r = report("--where \"method = 'oracle'\" --out " + shell_quote(out.string()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(out / "run-2.png")) << "a figure of the previous report survived";
    EXPECT_TRUE(fs::exists(out / "run-7.png"));  // the oracle run at top-k 4
    EXPECT_EQ(count_named(dir_.path(), ".partial-") + count_named(dir_.path(), ".old-"), 0);
}

// Bad input needs no sweep: an empty results database is enough.
class ReportBadInput : public ::testing::Test {
  protected:
    void SetUp() override { kascade::ResultsDb create(results_); }
    CommandResult report(const std::string& args) {
        return run_kascade("report --results " + shell_quote(results_.string()) + " --out " +
                           shell_quote(out_.string()) + " " + args);
    }
    TempDir dir_{"report-bad"};
    fs::path results_ = dir_ / "results";
    fs::path out_ = dir_ / "report";
};

TEST_F(ReportBadInput, WhereThatMatchesNothingWritesNoReport) {
    const CommandResult r = report("--where \"method = 'kascade'\"");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--where \"method = 'kascade'\" matches no run"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out_));
    EXPECT_EQ(count_named(dir_.path(), ".partial-"), 0);
}

TEST_F(ReportBadInput, InvalidWhereNamesTheCondition) {
    const CommandResult r = report("--where \"no_such_column > 1\"");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--where \"no_such_column > 1\""), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no_such_column"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out_));
}

TEST_F(ReportBadInput, MissingGnuplotIsOneLineNamingThePackage) {
    const ScopedEnv no_path("PATH", (dir_ / "empty-bin").string());
    const CommandResult r = report("");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("gnuplot-nox"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out_));
}

TEST_F(ReportBadInput, MissingDatabaseIsNamed) {
    const CommandResult r = run_kascade("report --results " + shell_quote((dir_ / "nothing").string()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find((dir_ / "nothing" / "kascade.db").string()), std::string::npos) << r.err;
}

TEST_F(ReportBadInput, OutFolderThatIsNotAReportIsLeftAlone) {
    fs::create_directories(out_);
    dir_.write("report/notes.txt", "mine");
    const CommandResult r = report("");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is not a kascade report"), std::string::npos) << r.err;
    EXPECT_EQ(read_all(out_ / "notes.txt"), "mine");
}

}  // namespace
