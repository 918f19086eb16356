// tests/report/test_report_figures.cpp: the figure builders on hand-made results, drawn by the real gnuplot: the
// Pareto front derived by hand, labels that name only what differs, and shapes the quick sweep does not produce
// (a schedule with no reuse layer, a run without output errors).
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline/report/gnuplot.h"
#include "pipeline/report/report_figures.h"
#include "report_check.h"

namespace {

using namespace kascade;

ReportRun make_run(std::int64_t id, const std::string& method, double density, double degradation) {
    ReportRun r;
    r.id = id;
    r.method = parse_mode<EvalMethod>(method, "test method");
    if (r.method == EvalMethod::Kascade) r.policy = SchedulePolicy::Dp;
    if (r.method == EvalMethod::Kascade) r.n_anchors = 2;
    r.tile = 16;
    r.topk_tiles = 4;
    r.ctx = 512;
    r.n_tokens = 8192;
    r.ppl_dense = 4.0;
    r.ppl_sparse = 4.0 * (1 + degradation / 100);
    r.degradation_pct = degradation;
    r.density = density;
    r.model_path = "/m/stories260K.bin";
    r.model_hash = "m";
    r.text_path = "/t/TinyStories-valid.head.txt";
    r.text_hash = "t";
    r.git_commit = "0123456789ab";
    for (int l = 0; l < 3; ++l)
        r.layers.push_back(
            {l, l == 0 ? RunLayerRole::Dense : RunLayerRole::Anchor, std::nullopt, density, std::nullopt});
    return r;
}

/// The rows of datablock `name` in a gnuplot script, block by block ("index"), each row as its text line.
std::vector<std::vector<std::string>> datablock(const std::string& script, const std::string& name) {
    const size_t start = script.find("$" + name + " << EOD\n");
    EXPECT_NE(start, std::string::npos) << name;
    std::vector<std::vector<std::string>> blocks(1);
    std::istringstream in(script.substr(script.find('\n', start) + 1));
    std::string line;
    int blank = 0;
    while (std::getline(in, line) && line != "EOD") {
        if (line.empty()) {
            if (++blank == 2) blocks.emplace_back();
            continue;
        }
        blank = 0;
        blocks.back().push_back(line);
    }
    if (blocks.back().empty()) blocks.pop_back();
    return blocks;
}

TEST(ReportFigures, ParetoFrontIsTheRunsNoOtherRunOfTheMethodBeats) {
    ReportData data;
    // kascade: (0.3, 5) front; (0.4, 6) dominated; (0.5, 2) front; (0.6, 2) not strictly better; (0.7, 0.5) front.
    data.runs = {make_run(1, "kascade", 0.3, 5), make_run(2, "kascade", 0.4, 6),   make_run(3, "kascade", 0.5, 2),
                 make_run(4, "kascade", 0.6, 2), make_run(5, "kascade", 0.7, 0.5), make_run(6, "oracle", 0.3, 1)};
    const std::vector<ReportFigure> figures = pareto_figures(data);
    ASSERT_EQ(figures.size(), 1u);
    const std::string script = gnuplot_script(figures[0].plot);
    const auto front = datablock(script, "front");
    ASSERT_EQ(front.size(), 2u);  // series in name order: kascade (dp), oracle
    EXPECT_EQ(front[0], (std::vector<std::string>{"0.3 5", "0.5 2", "0.7 0.5"}));
    EXPECT_EQ(front[1], (std::vector<std::string>{"0.3 1"}));
    EXPECT_EQ(datablock(script, "points")[0].size(), 5u);
    EXPECT_NE(script.find("title \"kascade (dp)\""), std::string::npos);
    EXPECT_NE(script.find("kascade 0123456789ab"), std::string::npos);
}

TEST(ReportFigures, CurveLabelsNameOnlyTheParametersThatDiffer) {
    ReportData data;
    for (int k : {4, 8}) {
        for (int anchors : {2, 3}) {
            ReportRun r = make_run(k * 10 + anchors, "kascade", 0.5, 1);
            r.topk_tiles = k;
            r.n_anchors = anchors;
            r.metric = SimilarityMetric::Recall;  // the same everywhere: never in a label
            data.runs.push_back(r);
        }
    }
    const std::vector<ReportFigure> figures = topk_figures(data);
    ASSERT_EQ(figures.size(), 1u);
    const std::string script = gnuplot_script(figures[0].plot);
    EXPECT_NE(script.find("title \"kascade (dp), K=2\""), std::string::npos) << script;
    EXPECT_NE(script.find("title \"kascade (dp), K=3\""), std::string::npos) << script;
    EXPECT_EQ(script.find("recall"), std::string::npos) << script;
    // x = top-k tiles x tile size, in keys
    EXPECT_EQ(datablock(script, "curves")[0], (std::vector<std::string>{"64 4.04 42", "128 4.04 82"}));
}

TEST(ReportFigures, DecodeRunsGetPanelsOfTheirOwn) {
    // The same model, text, methods and budgets once in prefill and once in decode: a decode perplexity is not
    // comparable with a prefill one, so each phase gets its own Pareto and top-k panel, headed by its context.
    ReportData data;
    for (const char* phase : {"prefill", "decode"}) {
        for (const char* method : {"kascade", "oracle"}) {
            ReportRun r = make_run(static_cast<std::int64_t>(data.runs.size()) + 1, method, 0.4, 2);
            r.phase = parse_mode<EvalPhase>(phase, "test phase");
            if (r.phase == EvalPhase::Decode) r.prompt_tokens = 256, r.decode_tokens = 128;
            data.runs.push_back(r);
        }
    }
    for (auto* make : {pareto_figures, topk_figures}) {
        const std::vector<ReportFigure> figures = make(data);
        ASSERT_EQ(figures.size(), 2u);
        std::vector<std::string> headings;
        for (const ReportFigure& f : figures) {
            headings.push_back(f.heading);
            // Each panel holds one run per method: kascade and oracle of its phase only.
            const std::string script = gnuplot_script(f.plot);
            EXPECT_EQ(datablock(script, make == pareto_figures ? "points" : "curves").size(), 2u) << script;
        }
        std::sort(headings.begin(), headings.end());
        EXPECT_NE(headings[0].find("ctx 512"), std::string::npos) << headings[0];
        EXPECT_NE(headings[1].find("decode, prompt 256 + 128"), std::string::npos) << headings[1];
    }
}

TEST(ReportFigures, ScheduleWithoutReuseLayersAndRunWithoutErrorsAreDrawn) {
    ReportData data;
    ReportRun run = make_run(7, "kascade", 1.0, 0);
    run.schedule_id = 3;
    data.runs = {run};
    ReportSchedule s;
    s.id = 3;
    s.policy = SchedulePolicy::Dp;
    s.n_anchors = 3;
    s.n_layers = 3;
    s.n_anchor_layers = 3;
    s.metric = SimilarityMetric::Recall;
    s.aggregation = SimilarityAggregation::Mean;
    s.head_map = HeadMapMode::Argmax;
    s.layers = {{0, LayerRole::Dense, std::nullopt, {}, std::nullopt},
                {1, LayerRole::Anchor, std::nullopt, {}, std::nullopt},
                {2, LayerRole::Anchor, std::nullopt, {}, std::nullopt}};
    data.schedules[3] = s;
    std::vector<GnuplotFigure> plots;
    for (auto* make : {schedule_figures, run_figures}) {
        for (const ReportFigure& f : make(data)) plots.push_back(f.plot);
    }
    ASSERT_EQ(plots.size(), 2u);  // the diagram (no head maps without reuse layers) and the run
    TempDir dir("report-figures");
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

TEST(ReportFigures, GnuplotStringsEscapeQuotesBackslashesAndLineBreaks) {
    EXPECT_EQ(gnuplot_string("a \"b\" \\ c\nd"), "\"a \\\"b\\\" \\\\ c\\nd\"");
}

}  // namespace
