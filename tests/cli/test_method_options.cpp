// tests/cli/test_method_options.cpp: eval, generate and task read their attention-method options through one step
// (pipeline/cli/method_options.h), so the same combination gets the same answer from each: the same refusal with
// the same words, and nothing written.
#include <gtest/gtest.h>

#include "pipeline/sweep_fixture.h"

namespace {

struct MethodCase {
    std::string options;
    std::string message;
};

TEST(MethodOptions, EvalGenerateAndTaskRefuseTheSameCombinationsWithTheSameMessage) {
    TempDir dir("method-options");
    const std::string model = " --model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok);
    const std::string results = " --results " + shell_quote(dir / "results");
    const std::vector<std::string> commands = {
        "eval" + model + " --text " + shell_quote(kStoriesText) + " --phase decode" + results,
        "generate" + model + " -n 8" + results,
        "task" + model + " --task passkey --lengths 256" + results,
    };
    const std::vector<MethodCase> cases = {
        {"--method quest", "--method quest needs a key budget: --topk-tiles N or --topk-pct P"},
        {"--method oracle --topk-tiles 4 --page-size 8", "--page-size applies to --method quest"},
        {"--method kascade", "--method kascade needs --schedule ID (see `kascade status`)"},
        {"--method orcale --topk-tiles 4", "invalid --method='orcale'"},
        {"--method oracle --topk-tiles 4 --pooling max", "invalid --pooling='max'"},
        {"--method omnikv --topk-tiles 4", "--method omnikv needs --filter-layers L,L,..."},
        {"--method oracle --topk-tiles 4 --selection-layers 2",
         "--selection-layers and --window-ratio apply to "
         "--method lessismore"},
        {"--method lessismore --selection-layers 1 --topk-tiles 4 --pooling pre_softmax",
         "--pooling does not apply to --method lessismore"},
        {"--method dense --k-rule rolling", "--k-rule and --round-k need --topk-tiles N or --topk-pct P"},
    };
    for (const MethodCase& c : cases) {
        for (const std::string& command : commands) {
            SCOPED_TRACE(command + " " + c.options);
            const CommandResult r = run_kascade(command + " " + c.options);
            EXPECT_NE(r.exit_code, 0);
            EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        }
    }
    EXPECT_FALSE(fs::exists(dir / "results"));
}

}  // namespace
