// The retrieval test model (tests/fixtures/retrieval-model, trained by scripts/train_retrieval_model.py): kascade's
// greedy tokens equal those of the training script's own fp32 forward (reference_greedy.json), and the model
// card's retrieval claims hold on fewer samples than the card (dense and oracle top-k at 10 % retrieve the
// pass key; StreamingLLM only with the needle inside its window).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "../pipeline/sweep_fixture.h"
#include "common/shared_files.h"
#include "pipeline/runtime/greedy_generation.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/stages/workspace.h"

namespace {

using kascade::test::kRetrievalModel;

class RetrievalCard : public ::testing::Test {
  protected:
    TempDir dir_{"retrieval_card"};

    /// Mean score of `kascade task ... --json` on the fixture.
    double score(const std::string& args) {
        const CommandResult r = run_kascade("task --results " + shell_quote(dir_ / "results") + " --model " +
                                            shell_quote(kRetrievalModel) + args + " --json");
        EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
        if (r.exit_code != 0) return -1;
        return nlohmann::json::parse(r.out).at("score").get<double>();
    }
};

// Acceptance of the test-model issue: kascade's greedy tokens equal those of the training script's fp32 forward.
TEST(RetrievalFixture, GreedyTokensEqualTheTrainingScriptsForward) {
    const auto model = kascade::load_model_and_tokenizer(kRetrievalModel);
    std::ifstream in(kRetrievalModel / "reference_greedy.json");
    ASSERT_TRUE(in) << "missing " << (kRetrievalModel / "reference_greedy.json");
    const nlohmann::json ref = nlohmann::json::parse(in);
    ASSERT_GE(ref.at("samples").size(), 20u);
    const kascade::Transformer runtime(model->weights);
    const int32_t start = kascade::sequence_start_token(model->weights.config, model->tokenizer.get());
    ASSERT_EQ(start, 1);  // tok512.bin has no add_bos setting: the config's bos_token_id
    for (const auto& s : ref.at("samples")) {
        std::vector<int32_t> prompt{start};
        const std::vector<int32_t> ids = model->tokenizer->encode(s.at("prompt").get<std::string>());
        prompt.insert(prompt.end(), ids.begin(), ids.end());
        ASSERT_EQ(static_cast<int>(prompt.size()), s.at("prompt_tokens").get<int>());
        kascade::DenseAttention dense;
        const kascade::GreedyResult g = kascade::generate_greedy(runtime, *model->tokenizer, prompt, dense, dense,
                                                                 {.max_new_tokens = 12, .stop_at_newline = false});
        EXPECT_EQ(g.tokens, s.at("greedy").get<std::vector<int32_t>>()) << "prompt of " << prompt.size() << " tokens";
    }
}

// The model card's claims, on fewer samples than the card (each a test with the card's threshold less the error of
// the smaller count).
TEST_F(RetrievalCard, DenseAndOracleRetrieveStreamingOnlyInsideItsWindow) {
    const std::string grid = " --task passkey --lengths 1024,2048 --depths 5 --samples 4";
    EXPECT_GE(score(grid + " --method dense"), 0.95);
    EXPECT_GE(score(grid + " --method oracle --topk-pct 10 --k-min 64"), 0.9);
    // StreamingLLM: a sink tile and 256 recent keys (17 tiles of 16). The needle 0-50 % deep in 1-2K tokens is
    // outside the window; at 100 % it is inside.
    const std::string streaming = " --method streaming --topk-tiles 17 --tile 16 --task passkey --samples 10";
    EXPECT_LE(score(" --lengths 1024,2048 --depth-pcts 0,25,50" + streaming), 0.04);
    EXPECT_GE(score(" --lengths 1024,2048 --depth-pcts 100" + streaming), 0.9);
}

}  // namespace
