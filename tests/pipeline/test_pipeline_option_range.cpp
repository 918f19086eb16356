// tests/pipeline/test_pipeline_option_range.cpp: numeric options out of their range are refused while parsing,
// naming the option, the value and the range; nothing is computed or written.
#include <gtest/gtest.h>

#include "sweep_fixture.h"

namespace {

struct BadOption {
    std::string command;  ///< the subcommand and its required options
    std::string option;   ///< the option under test with its value
    std::string message;  ///< expected in the error line
};

void PrintTo(const BadOption& bad, std::ostream* os) {
    *os << bad.command.substr(0, bad.command.find(' ')) << " " << bad.option;
}

class OptionRange : public ::testing::TestWithParam<BadOption> {};

TEST_P(OptionRange, IsRefusedWithNameAndRange) {
    TempDir dir{"option_range"};
    const fs::path results = dir / "results";
    const BadOption& bad = GetParam();
    const CommandResult r = run_kascade(bad.command + " " + bad.option + " --results " + shell_quote(results));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err, "kascade: error: " + bad.message + "\n");
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(results));
}

const std::string kCapture =
    "capture --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) + " --calib-tokens 254";
const std::string kEval =
    "eval --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) + " --method oracle";
const std::string kSimilarity = "similarity --capture 0123456789abcdef";

INSTANTIATE_TEST_SUITE_P(
    Pipeline, OptionRange,
    ::testing::Values(BadOption{kCapture, "--offset -511", "--offset -511 is out of range (must be >= 0)"},
                      BadOption{kCapture, "--offset -1", "--offset -1 is out of range (must be >= 0)"},
                      BadOption{kCapture, "--ctx 0", "--ctx 0 is out of range (must be >= 2)"},
                      BadOption{kCapture, "--tile 0", "--tile 0 is out of range (must be >= 1)"},
                      BadOption{kCapture, "--calib-tokens 0", "--calib-tokens 0 is out of range (must be >= 1)"},
                      BadOption{kEval, "--offset -1", "--offset -1 is out of range (must be >= 0)"},
                      BadOption{kEval, "--tile 0", "--tile 0 is out of range (must be >= 1)"},
                      BadOption{kEval, "--topk-pct nan", "--topk-pct nan is out of range (must be in (0, 100])"},
                      BadOption{kEval, "--topk-pct 0", "--topk-pct 0 is out of range (must be in (0, 100])"},
                      BadOption{kEval, "--topk-pct 100.5", "--topk-pct 100.5 is out of range (must be in (0, 100])"},
                      BadOption{kEval, "--topk-pct ten", "--topk-pct ten is not a number (must be in (0, 100])"},
                      BadOption{kSimilarity, "--topk-tiles 0", "--topk-tiles 0 is out of range (must be >= 1)"}));

}  // namespace
