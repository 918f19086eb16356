// tests/pipeline/test_pipeline_bad_input.cpp: wrong inputs to the pipeline stages get one clear error line, a
// non-zero exit, and leave nothing written.
#include <gtest/gtest.h>

#include "sweep_fixture.h"

namespace {

void expect_error(const CommandResult& r, const std::string& needle) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

class BadPipelineInput : public ::testing::Test {
  protected:
    TempDir dir_{"bad_pipeline"};
    fs::path results_ = dir_ / "results";

    CommandResult sweep_with(const std::string& toml) {
        write_text(dir_ / "bad.toml", toml);
        return run_kascade("sweep " + shell_quote(dir_ / "bad.toml") + " --results " + shell_quote(results_));
    }
    /// A schedule made from a short capture on stories260K; returns its id.
    std::string make_schedule() {
        const CommandResult c =
            run_kascade("capture --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) +
                        " --text " + shell_quote(kStoriesText) + " --calib-tokens 254 --ctx 128");
        EXPECT_EQ(c.exit_code, 0) << c.err;
        const CommandResult s = run_kascade("similarity --results " + shell_quote(results_) + " --capture " +
                                            c.out.substr(8, 16) + " --topk-tiles 2 --key-granularity tile");
        EXPECT_EQ(s.exit_code, 0) << s.err;
        const CommandResult p = run_kascade("schedule --results " + shell_quote(results_) + " --similarity " +
                                            s.out.substr(11, 16) + " --policy dp --anchors 2");
        EXPECT_EQ(p.exit_code, 0) << p.err;
        return p.out.substr(9, p.out.find('\n') - 9);
    }
};

TEST_F(BadPipelineInput, UnknownKeyInSweepFile) {
    const auto r = sweep_with(replace(tiny_sweep_toml(), "topk_tiles = [2, 4]", "topk_tiels = [2, 4]"));
    expect_error(r, "unknown key grid.topk_tiels");
    EXPECT_NE(r.err.find("did you mean topk_tiles"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bad.toml"), std::string::npos);
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, OutOfRangeValueInSweepFile) {
    const auto r = sweep_with(replace(tiny_sweep_toml(), "threshold = [0.5, 0.95]", "threshold = [0.5, 1.5]"));
    expect_error(r, "schedules[0].threshold = 1.5 is out of range");
    EXPECT_FALSE(fs::exists(results_));
}

TEST_F(BadPipelineInput, SweepWithOverlappingCalibrationAndTest) {
    const auto r = sweep_with(replace(tiny_sweep_toml(), "[test]\n", "[test]\noffset = 100\n"));
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
    const int runs_before = std::stoi(sql_value(results_ / "kascade.db", "SELECT count(*) FROM runs"));
    const auto r =
        run_kascade("eval --results " + shell_quote(results_) + " --model " + shell_quote(kStoriesBin) + " --text " +
                    shell_quote(kStoriesText) + " --ctx 128 --schedule " + id + " --offset 100 --eval-tokens 254");
    expect_error(r, "overlap the calibration tokens");
    EXPECT_EQ(std::stoi(sql_value(results_ / "kascade.db", "SELECT count(*) FROM runs")), runs_before);
}

TEST_F(BadPipelineInput, ScheduleMadeForAnotherModel) {
    const std::string id = make_schedule();
    // The HF copy of stories260K has the same shapes but is another file: a schedule is tied to the model it was made
    // on.
    const auto r = run_kascade("eval --results " + shell_quote(results_) + " --model " +
                               shell_quote(kShared / "models/stories260K-hf") + " --text " + shell_quote(kStoriesText) +
                               " --ctx 128 --eval-tokens 254 --schedule " + id);
    expect_error(r, "was made for model");
    EXPECT_EQ(sql_value(results_ / "kascade.db", "SELECT count(*) FROM runs"), "0");
}

TEST_F(BadPipelineInput, UnknownCaptureKey) {
    const auto r =
        run_kascade("similarity --results " + shell_quote(results_) + " --capture 0123456789abcdef --topk-tiles 4");
    expect_error(r, "no capture with key '0123456789abcdef'");
}

}  // namespace
