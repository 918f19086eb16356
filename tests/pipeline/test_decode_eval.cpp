// tests/pipeline/test_decode_eval.cpp: decode-phase evaluation and sparse generation end to end on stories260K.
// The decode experiment file (reduced to one window and one budget) runs and stores decode runs beside the dense
// decode run of the same tokens; every method with a budget covering the whole context equals dense decode (NLL,
// and the published greedy text for `generate`); bad decode options and sweep keys give one error line and write
// nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "common/json_output.h"
#include "sweep_fixture.h"

namespace {

const fs::path kGreedyReference = kShared / "models/stories260K/greedy-reference.txt";
// 64 tiles or pages of 16 keys cover the model's whole context of 512 positions.
const std::string kFullBudget = " --topk-tiles 64";
// The decode baselines with their options: OmniKV and LessIsMore need their layer lists.
const std::vector<std::string> kBaselines = {" --method oracle", " --method streaming", " --method quest",
                                             " --method omnikv --filter-layers 2",
                                             " --method lessismore --selection-layers 2"};

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class DecodeEval : public ::testing::Test {
  protected:
    TempDir dir_{"decode_eval"};
    fs::path results_ = dir_ / "results";

    void SetUp() override { ::setenv("KASCADE_ASSETS", KASCADE_SHARED_DIR, 1); }

    std::string model_args() const {
        return " --model " + shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok);
    }
    /// A decode eval of the first test window of the experiment (512 text tokens after the calibration range).
    CommandResult eval_decode(const std::string& method_args) {
        return run_kascade(
            "eval --results " + shell_quote(results_) + model_args() + " --text " + shell_quote(kStoriesText) +
            method_args +
            " --phase decode --prompt-tokens 256 --decode-tokens 256 --offset 8687 --eval-tokens 512 --json");
    }
    /// |NLL - dense NLL| / dense NLL of the run an eval printed (its --json run_id).
    double nll_relative_difference(const CommandResult& r) {
        EXPECT_EQ(r.exit_code, 0) << r.err;
        const std::string id = json_string(r, "run_id");
        const auto rows = db_rows(results_ / "kascade.db",
                                  "SELECT printf('%.17g', nll_sparse), printf('%.17g', nll_dense), phase, n_scored "
                                  "FROM runs_flat WHERE id = " +
                                      id);
        EXPECT_EQ(rows.size(), 1u) << r.out;
        if (rows.size() != 1) return 1;
        EXPECT_EQ(rows[0][2], "decode");
        EXPECT_EQ(rows[0][3], "256");
        const double sparse = std::stod(rows[0][0]), dense = std::stod(rows[0][1]);
        return std::abs(sparse - dense) / dense;
    }
};

TEST_F(DecodeEval, ExperimentFileRunsEndToEndAndFullBudgetsEqualDenseDecode) {
    // The experiment as shipped, reduced to two calibration windows, one decode window, one budget and one schedule
    // of each policy.
    std::string toml = read_file(fs::path(KASCADE_SOURCE_DIR) / "experiments/decode-stories260k.toml");
    toml = replace_first(toml, "tokens = 8687", "tokens = 1022");
    toml = replace_first(toml, "tokens = 2048", "tokens = 512");
    toml = replace_first(toml, "topk_tiles = [2, 4, 8]", "topk_tiles = [4]");
    toml = replace_first(toml, "threshold = [0.5, 0.8]", "threshold = [0.8]");
    toml = replace_first(toml, "anchors = [2, 3]", "anchors = [3]");
    write_text(dir_ / "decode.toml", toml);
    const CommandResult sweep = run_kascade("sweep " + shell_quote(dir_ / "decode.toml") + " --results " +
                                            shell_quote(results_) + " --no-report");
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err << sweep.out;

    const auto runs = db_rows(results_ / "kascade.db",
                              "SELECT method, phase, prompt_tokens, decode_tokens, n_scored, ctx, page_size, "
                              "printf('%.12g', ppl_dense), density < 1, topk_tiles FROM runs_flat ORDER BY id");
    ASSERT_EQ(runs.size(), 8u);
    const std::vector<std::string> methods = {"dense",     "kascade", "kascade", "oracle",
                                              "streaming", "quest",   "omnikv",  "lessismore"};
    for (size_t i = 0; i < runs.size(); ++i) {
        const auto& r = runs[i];
        EXPECT_EQ(r[0], methods[i]);
        EXPECT_EQ(r[1], "decode");
        EXPECT_EQ(r[2], "256");
        EXPECT_EQ(r[3], "256");
        EXPECT_EQ(r[4], "256");  // one window: 256 decode steps scored
        EXPECT_EQ(r[5], "512");
        EXPECT_EQ(r[6], r[0] == "quest" ? "16" : "NULL");
        EXPECT_EQ(r[7], runs[0][7]) << "every run compares with the dense decode run of its tokens";
        EXPECT_EQ(r[8], r[0] == "dense" ? "0" : "1") << r[0];
        EXPECT_EQ(r[9], r[0] == "dense" ? "NULL" : "4");
    }
    // Per-layer rows: Quest keeps layers 0 and 1 dense and selects pages in the others; OmniKV filters at layer 2
    // (3 is dense after it, 4 reuses its keys); LessIsMore selects at 2 for 3 and 4. Their layer lists are stored.
    const auto roles = [&](const std::string& method) {
        return db_value(results_ / "kascade.db",
                        "SELECT group_concat(role) FROM (SELECT role FROM run_layers l JOIN runs r ON r.id = "
                        "l.run_id WHERE r.method = '" +
                            method + "' ORDER BY layer)");
    };
    EXPECT_EQ(roles("quest"), "dense,dense,quest,quest,quest");
    EXPECT_EQ(roles("omnikv"), "dense,dense,filter,dense,reuse");
    EXPECT_EQ(roles("lessismore"), "dense,dense,selection,reuse,reuse");
    EXPECT_EQ(db_value(results_ / "kascade.db",
                       "SELECT group_concat(method || ' ' || selection_layers || ' ' || ifnull(window_ratio, '-') || "
                       "' ' || tile, '; ') FROM runs_flat WHERE selection_layers IS NOT NULL"),
              "omnikv [2] - 16; lessismore [2] 0.25 16");

    // With a budget covering the whole context every decode policy attends every key: its NLL is dense decode's.
    const std::string schedule_id =
        db_value(results_ / "kascade.db", "SELECT schedule_id FROM runs WHERE method = 'kascade' LIMIT 1");
    EXPECT_LT(nll_relative_difference(eval_decode(" --schedule " + schedule_id + kFullBudget)), 1e-6);
    for (const std::string& method : kBaselines)
        EXPECT_LT(nll_relative_difference(eval_decode(method + kFullBudget)), 1e-6) << method;

    // Generation with the schedule and a full budget writes the published dense greedy text.
    const CommandResult generated = run_kascade("generate --results " + shell_quote(results_) + model_args() +
                                                " --schedule " + schedule_id + kFullBudget + " -n 256 --greedy");
    ASSERT_EQ(generated.exit_code, 0) << generated.err;
    EXPECT_EQ(generated.out, read_file(kGreedyReference));
    EXPECT_NE(generated.err.find("decode tokens/s; kascade"), std::string::npos) << generated.err;
}

TEST_F(DecodeEval, GenerateWithEachBaselineAtAFullBudgetWritesTheDenseGreedyText) {
    for (const std::string& method : kBaselines) {
        const CommandResult r = run_kascade("generate" + model_args() + method + kFullBudget + " -n 256 --greedy");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, read_file(kGreedyReference)) << method;
        // One summary line with both figures: the prompt's prefill, then the decode steps.
        EXPECT_NE(r.err.find("prefill tokens/s); generated 256 tokens, 255 decode steps"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("decode tokens/s"), std::string::npos) << r.err;
    }
}

TEST_F(DecodeEval, BadDecodeOptionsAreOneLineErrorsThatWriteNothing) {
    const std::string text = " --text " + shell_quote(kStoriesText);
    const std::string eval = "eval --results " + shell_quote(results_) + model_args() + text;
    expect_error(run_kascade(eval + " --method dense --phase decoding"),
                 "invalid --phase='decoding' (expected prefill, decode); did you mean decode?");
    expect_error(
        run_kascade(eval + " --method quset --phase decode --topk-tiles 4"),
        "invalid --method='quset' (expected dense, kascade, oracle, streaming, quest, omnikv, lessismore); did "
        "you mean quest?");
    expect_error(run_kascade(eval + " --method quest --topk-tiles 4"),
                 "method quest is a decode method (it attends densely in prefill): add --phase decode");
    expect_error(run_kascade(eval + " --method oracle --topk-tiles 4 --phase decode --prompt-tokens 300"),
                 "prompt-tokens=300 + decode-tokens=256 is more than the model's context of 512 positions");
    expect_error(run_kascade(eval + " --method oracle --topk-tiles 4 --prompt-tokens 64"),
                 "--prompt-tokens and --decode-tokens apply to --phase decode");
    expect_error(run_kascade(eval + " --method oracle --topk-tiles 4 --phase decode --ctx 256"),
                 "--ctx applies to --phase prefill; a decode window is --prompt-tokens + --decode-tokens");
    expect_error(run_kascade(eval + " --method oracle --topk-tiles 4 --phase decode --page-size 8"),
                 "--page-size applies to --method quest");
    expect_error(run_kascade("generate" + model_args() + " --method quest -n 16"),
                 "--method quest needs a key budget: --topk-tiles N or --topk-pct P");
    expect_error(run_kascade("generate" + model_args() + " --method oracle --topk-tiles 4 --page-size 8 -n 16"),
                 "--page-size applies to --method quest");
    expect_error(run_kascade("generate" + model_args() + " --method kascade -n 16"),
                 "--method kascade needs --schedule ID");
    // OmniKV and LessIsMore: their own options, their layers within the model, decode only.
    const std::string decode = " --topk-tiles 4 --phase decode";
    expect_error(run_kascade(eval + " --method omnikv" + decode),
                 "--method omnikv needs --filter-layers L,L,... (the Kascade paper's for Llama-3.1-8B: 2,8,18)");
    expect_error(run_kascade(eval + " --method lessismore --filter-layers 2" + decode),
                 "--filter-layers applies to --method omnikv");
    expect_error(run_kascade(eval + " --method omnikv --filter-layers 2 --window-ratio 0.5" + decode),
                 "--selection-layers and --window-ratio apply to --method lessismore");
    expect_error(run_kascade(eval + " --method omnikv --filter-layers 2 --pooling pre_softmax" + decode),
                 "--pooling does not apply to --method omnikv");
    expect_error(run_kascade(eval + " --method lessismore --selection-layers 2 --key-granularity tile" + decode),
                 "--method lessismore selects single keys: --key-granularity tile does not apply to it");
    expect_error(run_kascade(eval + " --method lessismore --selection-layers 2 --window-ratio 1.5" + decode),
                 "--window-ratio 1.5 is out of range (must be in [0, 1])");
    expect_error(run_kascade(eval + " --method omnikv --filter-layers 2 --topk-tiles 4"),
                 "method omnikv is a decode method (it attends densely in prefill): add --phase decode");
    expect_error(run_kascade(eval + " --method omnikv --filter-layers 1" + decode),
                 "invalid --filter-layers=1: layer 1 must be in [2, 4] (layers 0..1 attend densely, as in OmniKV's "
                 "reference; the model has 5 layers)");
    expect_error(run_kascade(eval + " --method omnikv --filter-layers 2,3" + decode),
                 "layers 2 and 3 are adjacent, but the layer after a filter layer attends densely");
    expect_error(run_kascade(eval + " --method lessismore --selection-layers 2,5" + decode),
                 "invalid --selection-layers=2,5: layer 5 must be in [0, 4] (the model has 5 layers)");
    expect_error(
        run_kascade("generate" + model_args() + " --method lessismore --selection-layers 9 --topk-tiles 4 -n 32"),
        "invalid --selection-layers=9: layer 9 must be in [0, 4]");
    EXPECT_FALSE(fs::exists(results_));

    const std::string sweep = tiny_sweep_toml();
    auto sweep_with = [&](const std::string& toml) {
        write_text(dir_ / "bad.toml", toml);
        return run_kascade("sweep " + shell_quote(dir_ / "bad.toml") + " --results " + shell_quote(results_));
    };
    expect_error(sweep_with(replace_first(sweep, "\"streaming\"]", "\"streaming\", \"quest\"]")),
                 "baselines.methods = \"quest\" is a decode method: it needs test.phase = \"decode\"");
    const std::string decode_sweep = replace_first(sweep, "[test]\n",
                                                   "[test]\nphase = \"decode\"\nprompt_tokens = 200\n"
                                                   "decode_tokens = 56\n");
    expect_error(sweep_with(replace_first(sweep, "\"streaming\"]",
                                          "\"streaming\", \"lessismore\"]\n"
                                          "lessismore_selection_layers = [2]")),
                 "baselines.methods = \"lessismore\" is a decode method: it needs test.phase = \"decode\"");
    expect_error(sweep_with(replace_first(decode_sweep, "\"streaming\"]", "\"streaming\", \"omnikv\"]")),
                 "baselines.methods has \"omnikv\": it needs baselines.omnikv_filter_layers (a list of layers)");
    expect_error(
        sweep_with(replace_first(decode_sweep, "\"streaming\"]", "\"streaming\"]\nlessismore_window_ratio = 0.5")),
        "baselines.lessismore_window_ratio applies to the lessismore method only");
    expect_error(sweep_with(replace_first(decode_sweep, "\"streaming\"]",
                                          "\"streaming\", \"omnikv\"]\nomnikv_filter_layers = [2, 7]")),
                 "invalid baselines.omnikv_filter_layers=2,7: layer 7 must be in [2, 4]");
    expect_error(sweep_with(replace_first(sweep, "[test]\n", "[test]\nphase = \"decod\"\n")),
                 "invalid test.phase='decod' (expected prefill, decode); did you mean decode?");
    expect_error(sweep_with(replace_first(sweep, "[test]\n", "[test]\nprompt_tokens = 64\n")),
                 "test.prompt_tokens and test.decode_tokens apply to phase = \"decode\" only");
    expect_error(sweep_with(replace_first(sweep, "[test]\n", "[test]\nphase = \"decode\"\nprompt_tokens = 0\n")),
                 "test.prompt_tokens = 0 is out of range");
    expect_error(sweep_with(replace_first(sweep, "[test]\n", "[test]\nphase = \"decode\"\n")),
                 "test.tokens = 508 holds no decode window of test.prompt_tokens + test.decode_tokens = 512 tokens");
    EXPECT_FALSE(fs::exists(results_));
}

}  // namespace
