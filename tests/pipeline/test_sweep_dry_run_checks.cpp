// Issue 25, class 5: every check that depends on the model runs in a sweep's dry run and before anything is written.
// Each case below is a sweep whose jobs would all fail on stories260K (a 512-position context): the dry run must
// refuse it, and the real run must refuse it leaving no results folder (no database holding only a failure row).
#include <gtest/gtest.h>

#include "sweep_fixture.h"

namespace {

/// The tiny sweep with its [test] table replaced by `test_table` and [task] table `task_table` appended.
std::string sweep_with(const std::string& test_table, const std::string& task_table = "") {
    std::string toml = tiny_sweep_toml();
    const size_t test = toml.find("[test]"), grid = toml.find("[grid]");
    return toml.substr(0, test) + test_table + toml.substr(grid) + task_table;
}

}  // namespace

TEST(SweepDryRunChecks, ModelDependentChecksRunInTheDryRunAndBeforeAnyWrite) {
    TempDir dir("dry-run-checks");
    const std::vector<std::pair<std::string, std::string>> cases = {
        // The decode window (prompt + decode tokens) beyond the model's 512 positions.
        {sweep_with("[test]\ntokens = 1000\nphase = \"decode\"\nprompt_tokens = 400\ndecode_tokens = 200\n"),
         "[test] prompt-tokens=400 + decode-tokens=200 is more than the model's context of 512 positions"},
        // A task prompt and its answer beyond the model's context.
        {sweep_with("[test]\ntokens = 508\n", "[task]\ntasks = \"passkey\"\nlengths = [600]\n"),
         "[task] passkey: invalid length 600"},
        // The test range past the end of the text.
        {sweep_with("[test]\ntokens = 100000000\n"), "runs past the end of text"},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto& [toml, expected] = cases[i];
        const fs::path file = dir / ("case" + std::to_string(i) + ".toml");
        const fs::path results = dir / ("results" + std::to_string(i));
        write_text(file, toml);
        for (const std::string& mode : {std::string(" --dry-run"), std::string()}) {
            const CommandResult r =
                run_kascade("sweep " + shell_quote(file) + " --results " + shell_quote(results) + mode);
            EXPECT_EQ(r.exit_code, 1) << i << mode << "\n" << r.out;
            EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
            EXPECT_NE(r.err.find(expected), std::string::npos) << i << mode << "\n" << r.err;
            EXPECT_FALSE(fs::exists(results)) << i << mode;
        }
    }
}
