// tests/pipeline/test_pipeline_bad_input.cpp: wrong inputs to the pipeline stages get one clear error line, a
// non-zero exit, and leave nothing written.
#include <gtest/gtest.h>

#include "common/json_output.h"
#include "sweep_fixture.h"

namespace {

class BadPipelineInput : public ::testing::Test {
  protected:
    TempDir dir_{"bad_pipeline"};
    fs::path results_ = dir_ / "results";

    CommandResult sweep_with(const std::string& toml, const std::string& options = "") {
        write_text(dir_ / "bad.toml", toml);
        return run_kascade("sweep " + shell_quote(dir_ / "bad.toml") + options + " --results " + shell_quote(results_));
    }
    /// The error of a sweep file both with --dry-run and for real: the same line, before any job, nothing written.
    std::string model_dependent_error(const std::string& toml) {
        const CommandResult dry = sweep_with(toml, " --dry-run");
        EXPECT_NE(dry.exit_code, 0);
        EXPECT_TRUE(dry.out.empty()) << dry.out;
        const CommandResult real = sweep_with(toml);
        EXPECT_NE(real.exit_code, 0);
        EXPECT_EQ(real.err, dry.err);
        EXPECT_TRUE(real.out.empty()) << real.out;  // no job started
        EXPECT_FALSE(fs::exists(results_));
        return dry.err;
    }
    std::string file_() const { return (dir_ / "bad.toml").string(); }
    /// A schedule made from a short capture on stories260K; returns its id.
    std::string make_schedule() {
        const CommandResult c =
            run_kascade("capture --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) +
                        " --text " + shell_quote(kStoriesText) + " --calib-tokens 254 --ctx 128 --json");
        EXPECT_EQ(c.exit_code, 0) << c.err;
        const CommandResult s =
            run_kascade("similarity --results " + shell_quote(results_) + " --capture " +
                        json_string(c, "capture_key") + " --topk-tiles 2 --key-granularity tile --json");
        EXPECT_EQ(s.exit_code, 0) << s.err;
        const CommandResult p = run_kascade("schedule --results " + shell_quote(results_) + " --similarity " +
                                            json_string(s, "similarity_key") + " --policy dp --anchors 2 --json");
        EXPECT_EQ(p.exit_code, 0) << p.err;
        return json_string(p, "schedule_id");
    }
};

TEST_F(BadPipelineInput, UnknownKeyInSweepFile) {
    const auto r = sweep_with(replace_first(tiny_sweep_toml(), "topk_tiles = [2, 4]", "topk_tiels = [2, 4]"));
    expect_error(r, "unknown key grid.topk_tiels");
    EXPECT_NE(r.err.find("did you mean topk_tiles"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bad.toml"), std::string::npos);
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, OutOfRangeValueInSweepFile) {
    const auto r = sweep_with(replace_first(tiny_sweep_toml(), "threshold = [0.5, 0.95]", "threshold = [0.5, 1.5]"));
    expect_error(r, "schedules[0].threshold = 1.5 is out of range");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, EmptyModelOrTextPathInSweepFile) {
    const std::string text = "path = \"" + kStoriesText.string() + "\"";
    expect_error(sweep_with(replace_first(tiny_sweep_toml(), text, "path = \"\"")),
                 file_() + ": text.path is empty (expected a path)");
    EXPECT_FALSE(fs::exists(results_));

    const std::string model = "path = \"" + kStoriesBin.string() + "\"";
    expect_error(sweep_with(replace_first(tiny_sweep_toml(), model, "path = \"\""), " --dry-run"),
                 file_() + ": model.path is empty (expected a path)");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, FloatTokenCountInSweepFile) {
    for (const std::string value : {"5.5e21", "381.0"}) {
        const std::string toml = replace_first(tiny_sweep_toml(), "tokens = 381", "tokens = " + value);
        expect_error(sweep_with(toml), file_() + ": calibration.tokens must be an integer");
        EXPECT_FALSE(fs::exists(results_));
    }
}

// stories260K: 5 layers, a context of 512 positions; the text has a few thousand tokens.
TEST_F(BadPipelineInput, SweepAnchorsBeyondTheModelsLayers) {
    const std::string err =
        model_dependent_error(replace_first(tiny_sweep_toml(), "anchors = [2]", "anchors = [2, 9]"));
    EXPECT_EQ(err, "kascade: error: " + file_() + ": schedules[1].anchors = 9: the model has 5 layers (0..4)\n");
}

TEST_F(BadPipelineInput, SweepAnchorListBeyondTheModelsLayers) {
    const std::string err = model_dependent_error(
        replace_first(tiny_sweep_toml(), "policy = \"dp\"\nanchors = [2]", "policy = \"fixed\"\nanchor_list = [0, 9]"));
    EXPECT_EQ(err,
              "kascade: error: " + file_() + ": schedules[1].anchor_list = [0, 9]: the model has 5 layers (0..4)\n");
}

TEST_F(BadPipelineInput, SweepCtxBeyondTheModelsContext) {
    const std::string err = model_dependent_error(replace_first(tiny_sweep_toml(), "ctx = [128]", "ctx = [128, 1024]"));
    EXPECT_EQ(err, "kascade: error: " + file_() + ": grid.ctx = 1024: model \"" + kStoriesBin.string() +
                       "\" has a context of 512 positions\n");
}

TEST_F(BadPipelineInput, SweepTestTokensBeyondTheText) {
    const std::string err =
        model_dependent_error(replace_first(tiny_sweep_toml(), "[test]\ntokens = 508", "[test]\ntokens = 10000000"));
    EXPECT_NE(err.find(file_() +
                       ": test.offset = 381 (after the calibration range) + test.tokens = 10000000 runs "
                       "past the end of text \"" +
                       kStoriesText.string() + "\""),
              std::string::npos)
        << err;
}

TEST_F(BadPipelineInput, SweepCalibrationBeyondTheText) {
    const std::string err = model_dependent_error(
        replace_first(tiny_sweep_toml(), "[calibration]\noffset = 0", "[calibration]\noffset = 10000000"));
    EXPECT_NE(
        err.find(file_() + ": calibration.offset = 10000000 + calibration.tokens = 381 runs past the end of text"),
        std::string::npos)
        << err;
}

TEST_F(BadPipelineInput, SweepCalibrationShorterThanOneWindow) {
    const std::string err = model_dependent_error(replace_first(tiny_sweep_toml(), "tokens = 381", "tokens = 100"));
    EXPECT_EQ(err, "kascade: error: " + file_() +
                       ": calibration.tokens = 100 is less than one window of 127 tokens at grid.ctx = 128\n");
}

/// The sweep file and the command line refuse a value with the same range: one table (param_ranges.h) for both.
TEST_F(BadPipelineInput, SweepAndCommandLineShareTheirRanges) {
    struct Case {
        std::string toml_from, toml_to, cli, sweep_key;
    };
    const std::string capture =
        "capture --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) + " ";
    const std::string schedule = "schedule --similarity 0123456789abcdef ";
    const std::string similarity = "similarity --capture 0123456789abcdef ";
    for (const Case& c :
         {Case{"ctx = [128]", "ctx = [1]", capture + "--ctx 1", "grid.ctx = 1"},
          Case{"tile = [16]", "tile = [0]", capture + "--tile 0", "grid.tile = 0"},
          Case{"topk_tiles = [2, 4]", "topk_pct = [0]", similarity + "--topk-pct 0", "grid.topk_pct = 0"},
          Case{"topk_tiles = [2, 4]", "topk_pct = [100.5]", similarity + "--topk-pct 100.5", "grid.topk_pct = 100.5"},
          Case{"threshold = [0.5, 0.95]", "threshold = [1.5]", schedule + "--threshold 1.5",
               "schedules[0].threshold = 1.5"},
          Case{"max_reuse_dist = 2", "max_reuse_dist = 0", schedule + "--max-reuse-dist 0",
               "schedules[0].max_reuse_dist = 0"},
          Case{"anchors = [2]", "anchors = [0]", schedule + "--anchors 0", "schedules[1].anchors = 0"},
          Case{"[calibration]\noffset = 0", "[calibration]\noffset = -1", capture + "--offset -1",
               "calibration.offset = -1"}}) {
        const CommandResult cli = run_kascade(c.cli + " --results " + shell_quote(results_));
        const CommandResult sweep = sweep_with(replace_first(tiny_sweep_toml(), c.toml_from, c.toml_to), " --dry-run");
        const size_t cli_at = cli.err.find("(must be"), sweep_at = sweep.err.find("(must be");
        ASSERT_NE(cli_at, std::string::npos) << c.cli << ": " << cli.err;
        ASSERT_NE(sweep_at, std::string::npos) << c.sweep_key << ": " << sweep.err;
        EXPECT_EQ(sweep.err.substr(sweep_at), cli.err.substr(cli_at)) << c.sweep_key;
        EXPECT_NE(sweep.err.find(file_() + ": " + c.sweep_key + " is out of range"), std::string::npos) << sweep.err;
        EXPECT_FALSE(fs::exists(results_));
    }
}

TEST_F(BadPipelineInput, SweepWithOverlappingCalibrationAndTest) {
    const auto r = sweep_with(replace_first(tiny_sweep_toml(), "[test]\n", "[test]\noffset = 100\n"));
    expect_error(r, "overlap");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, ResultsFolderThatCannotBeWritten) {
    write_text(dir_ / "tiny.toml", tiny_sweep_toml());
    write_text(dir_ / "a_file", "not a folder");
    const auto r = run_kascade("sweep " + shell_quote(dir_ / "tiny.toml") + " --results " +
                               shell_quote(dir_ / "a_file" / "results"));
    expect_error(r, "a_file");
}

TEST_F(BadPipelineInput, EvalRangeOverlappingTheCalibrationRange) {
    const std::string id = make_schedule();
    const int runs_before = std::stoi(db_value(results_ / "kascade.db", "SELECT count(*) FROM runs"));
    const auto r =
        run_kascade("eval --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) + " --text " +
                    shell_quote(kStoriesText) + " --ctx 128 --schedule " + id + " --offset 100 --eval-tokens 254");
    expect_error(r, "overlap the calibration tokens");
    EXPECT_EQ(std::stoi(db_value(results_ / "kascade.db", "SELECT count(*) FROM runs")), runs_before);
}

TEST_F(BadPipelineInput, ScheduleMadeForAnotherModel) {
    const std::string id = make_schedule();
    // The HF copy of stories260K has the same shapes but is another file: a schedule is tied to the model it was made
    // on.
    const auto r = run_kascade("eval --results " + shell_quote(results_) + " --model " +
                               shell_quote(kShared / "models/stories260K-hf") + " --text " + shell_quote(kStoriesText) +
                               " --ctx 128 --eval-tokens 254 --schedule " + id);
    expect_error(r, "was made for model");
    EXPECT_EQ(db_value(results_ / "kascade.db", "SELECT count(*) FROM runs"), "0");
}

TEST_F(BadPipelineInput, UnknownCaptureKey) {
    const auto r =
        run_kascade("similarity --results " + shell_quote(results_) + " --capture 0123456789abcdef --topk-tiles 4");
    expect_error(r, "no capture with key '0123456789abcdef'");
}

}  // namespace
