// tests/pipeline/test_eval_matmul.cpp: eval and task runs with --matmul bf16 are measured with BF16 products, stored
// as such (runs.matmul, task_runs.matmul) under keys of their own, and compared with a dense baseline of the same
// numerics; exact runs keep the keys they had before the option existed.
#include <gtest/gtest.h>

#include <cmath>

#include "common/json_output.h"
#include "common/temp_dir.h"
#include "io/weights/random_checkpoint.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/task_stage.h"
#include "pipeline/sweep_fixture.h"

namespace kascade {
namespace {

constexpr int kMatmulCtx = 128;
constexpr int64_t kTokens = 512;

/// A 2-layer random model at stories260K's shape with BF16 weights (the numerics --matmul bf16 changes), beside the
/// results folder, with stories260K's tokenizer (same vocabulary).
class EvalMatmul : public ::testing::Test {
  protected:
    void SetUp() override {
        write_random_checkpoint(kShared / "models/stories260K-hf/config.json", model_dir_,
                                RandomCheckpointOptions{.seed = 7, .layers = 2, .dtype = DType::BF16});
    }
    TempDir dir_{"eval-matmul"};
    fs::path model_dir_ = dir_ / "model";
    fs::path results_ = dir_ / "results";

    /// The dense perplexity of the test tokens with `precision`, computed here with the runtime directly.
    double dense_ppl(const LoadedModel& model, const LoadedText& text, MatmulPrecision precision) {
        const Transformer runtime(model.weights, 0, precision);
        DenseAttention dense;
        PerplexityOptions options;
        options.ctx = kMatmulCtx;
        options.max_tokens = kTokens;
        return evaluate_perplexity(runtime, dense, text.tokens,
                                   sequence_start_token(model.weights.config, model.tokenizer.get()), options)
            .perplexity();
    }
};

TEST_F(EvalMatmul, Bf16RunsAreMeasuredStoredAndKeyedWithTheirNumerics) {
    Workspace ws(results_);
    LoadedModel& model = ws.model(model_dir_, kStoriesTok);
    LoadedText& text = ws.text(kStoriesText, model);
    EvalParams exact;
    exact.method = EvalMethod::Oracle;
    exact.topk = TopKRule{4, 0, 0, KRule::Visible, 0};
    exact.tile = 16;
    exact.ctx = kMatmulCtx;
    exact.token_offset = 0;
    exact.n_tokens = kTokens;
    EvalParams bf16 = exact;
    bf16.matmul = MatmulPrecision::Bf16;
    const EvalResult exact_run = run_eval(ws, model, text, exact);
    const EvalResult bf16_run = run_eval(ws, model, text, bf16);
    ASSERT_NE(exact_run.run_id, bf16_run.run_id);

    // Each sparse run has a dense baseline of its own numerics: four runs, two of each.
    const fs::path db = results_ / "kascade.db";
    EXPECT_EQ(db_value(db,
                       "SELECT group_concat(method || ':' || matmul, ' ') FROM (SELECT method, matmul FROM runs "
                       "ORDER BY matmul, method)"),
              "dense:bf16 oracle:bf16 dense:exact oracle:exact");
    const double reference_exact = dense_ppl(model, text, MatmulPrecision::Exact);
    const double reference_bf16 = dense_ppl(model, text, MatmulPrecision::Bf16);
    EXPECT_NE(reference_exact, reference_bf16) << "BF16 products change nothing: the test would see no mix-up";
    for (const auto& [run_id, reference] :
         {std::pair{exact_run.run_id, reference_exact}, std::pair{bf16_run.run_id, reference_bf16}}) {
        SCOPED_TRACE(run_id);
        const double stored = std::stod(
            db_value(db, "SELECT printf('%.17g', ppl_dense) FROM runs_flat WHERE id = " + std::to_string(run_id)));
        EXPECT_NEAR(stored, reference, 1e-12 * reference);
    }

    // The exact run's key is the one it had before --matmul existed; the bf16 run's differs only by the numerics.
    const std::string exact_key = db_value(db, "SELECT key FROM runs WHERE id = " + std::to_string(exact_run.run_id));
    const std::string bf16_key = db_value(db, "SELECT key FROM runs WHERE id = " + std::to_string(bf16_run.run_id));
    EXPECT_NE(exact_key, bf16_key);
    ResolvedEval r;
    r.params = exact;
    r.tile = 16;
    r.topk = *exact.topk;
    r.ctx = kMatmulCtx;
    EXPECT_EQ(eval_key(r, {model.model_hash, model.tokenizer_hash, text.hash}, ""), exact_key);
}

TEST_F(EvalMatmul, TaskRunsStoreTheirNumericsUnderKeysOfTheirOwn) {
    const std::string task = "task --results " + shell_quote(results_) + " --model " + shell_quote(model_dir_) +
                             " --tokenizer " + shell_quote(kStoriesTok) +
                             " --task passkey --lengths 200 --samples 1 --method dense";
    ASSERT_EQ(run_kascade(task).exit_code, 0);
    ASSERT_EQ(run_kascade(task + " --matmul bf16").exit_code, 0);
    ASSERT_EQ(run_kascade(task + " --matmul exact").exit_code, 0);  // the first run again: stored
    const fs::path db = results_ / "kascade.db";
    EXPECT_EQ(db_value(db, "SELECT group_concat(matmul, ' ') FROM (SELECT matmul FROM task_runs ORDER BY id)"),
              "exact bf16");
    EXPECT_EQ(db_value(db, "SELECT count(DISTINCT key) FROM task_runs"), "2");
    EXPECT_EQ(db_value(db,
                       "SELECT group_concat(matmul, ' ') FROM (SELECT DISTINCT matmul FROM task_samples_flat "
                       "ORDER BY matmul)"),
              "bf16 exact");
    const CommandResult bad = run_kascade(task + " --matmul fp8");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("invalid --matmul='fp8' (expected exact, bf16)"), std::string::npos) << bad.err;
}

TEST_F(EvalMatmul, ASweepsModelMatmulPlansTheKeysOfTheCommands) {
    const fs::path toml = dir_ / "bf16.toml";
    write_text(toml, "[model]\npath = \"" + model_dir_.string() + "\"\ntokenizer = \"" + kStoriesTok.string() +
                         "\"\nmatmul = \"bf16\"\n[text]\npath = \"" + kStoriesText.string() +
                         "\"\n[calibration]\noffset = 0\ntokens = 254\n[test]\noffset = 1000\ntokens = 254\n"
                         "[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [2]\n[[schedules]]\npolicy = \"dp\"\n"
                         "anchors = [2]\n[baselines]\nmethods = [\"dense\", \"oracle\"]\n");
    const CommandResult sweep = run_kascade("sweep " + shell_quote(toml) + " --results " + shell_quote(results_));
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
    const fs::path db = results_ / "kascade.db";
    EXPECT_EQ(db_value(db, "SELECT group_concat(DISTINCT matmul) FROM runs"), "bf16");
    EXPECT_EQ(db_value(db, "SELECT count(*) FROM runs"), "3");  // dense, oracle, kascade
    // The command with the same settings finds the sweep's run: one key builder, the numerics included.
    const std::string eval =
        "eval --results " + shell_quote(results_) + " --model " + shell_quote(model_dir_) + " --tokenizer " +
        shell_quote(kStoriesTok) + " --text " + shell_quote(kStoriesText) +
        " --ctx 128 --offset 1000 --eval-tokens 254 --method oracle --topk-tiles 2 --tile 16 --json";
    EXPECT_EQ(json_of(run_kascade(eval + " --matmul bf16")).value("cached", false), true);
    EXPECT_EQ(json_of(run_kascade(eval)).value("cached", true), false);  // exact: a run of its own
}

}  // namespace
}  // namespace kascade
