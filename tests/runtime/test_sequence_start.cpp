// tests/runtime/test_sequence_start.cpp: the one rule for whether a sequence starts with BOS (the tokenizer's
// tokenizer_config.json add_bos_token, else the model's bos_token_id), and what it does to perplexity windows.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/error.h"
#include "common/shared_files.h"
#include "common/temp_dir.h"
#include "io/file_util.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/corpus_tokens.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/sequence_start.h"

namespace fs = std::filesystem;
using namespace kascade;

namespace {

// Llama 2's tokenizer.json; its config: add_bos_token true.
const fs::path kLlama2Json = test::kSharedDir / "models/tokenizers/llama-2/tokenizer.json";
const fs::path kSmolLm2Json = test::kSharedDir / "models/smollm2-135m-tokenizer/tokenizer.json";

ModelConfig model_with(int bos, int eos) {
    ModelConfig c;
    c.bos_token_id = bos;
    c.eos_token_id = eos;
    return c;
}

/// Llama 2's tokenizer.json copied to `dir` with `config` as its tokenizer_config.json (none if empty).
std::unique_ptr<Tokenizer> llama2_with_config(const test::TempDir& dir, std::string_view config) {
    const fs::path path = dir.write("tokenizer.json", read_file(kLlama2Json));
    if (!config.empty()) dir.write("tokenizer_config.json", config);
    return load_tokenizer(path);
}

TEST(SequenceStart, TokenizerConfigDecidesElseTheModel) {
    const ModelConfig llama = model_with(1, 2);
    const ModelConfig no_bos = model_with(-1, 2);
    // No tokenizer, or one that says nothing: the model's BOS, if any.
    EXPECT_EQ(sequence_start_token(llama, nullptr), 1);
    EXPECT_EQ(sequence_start_token(no_bos, nullptr), -1);
    test::TempDir silent_dir;
    const auto silent = llama2_with_config(silent_dir, "");
    EXPECT_EQ(sequence_start_token(llama, silent.get()), 1);
    EXPECT_EQ(sequence_start_token(no_bos, silent.get()), -1);
    // add_bos_token false: no BOS although the model has one.
    test::TempDir off_dir;
    const auto off = llama2_with_config(off_dir, R"({"add_bos_token": false})");
    EXPECT_EQ(sequence_start_token(llama, off.get()), -1);
    // add_bos_token true: the tokenizer's BOS (<s> = 1) even where the model's config names none.
    const auto on = load_tokenizer(kLlama2Json);
    EXPECT_EQ(sequence_start_token(no_bos, on.get()), 1);
    EXPECT_EQ(sequence_start_token(llama, on.get()), 1);
}

TEST(SequenceStart, AddBosWithoutAnyBosTokenIsAnError) {
    // SmolLM2's vocabulary has no <s>; with no bos_token named and no BOS in the model there is nothing to add.
    test::TempDir dir;
    const fs::path path = dir.write("tokenizer.json", read_file(kSmolLm2Json));
    dir.write("tokenizer_config.json", R"({"add_bos_token": true})");
    const auto tok = load_tokenizer(path);
    ASSERT_EQ(tok->bos_id(), -1);
    try {
        sequence_start_token(model_with(-1, 0), tok.get());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("add_bos_token to true, but neither"), std::string::npos) << e.what();
    }
}

TEST(SequenceStart, DocumentBoundaryIsTheStartTokenElseEos) {
    test::TempDir off_dir;
    const auto off = llama2_with_config(off_dir, R"({"add_bos_token": false})");
    EXPECT_EQ(document_boundary_token(model_with(1, 2), nullptr), 1);
    EXPECT_EQ(document_boundary_token(model_with(1, 2), off.get()), 2);
    EXPECT_EQ(document_boundary_token(model_with(-1, 2), nullptr), 2);
    EXPECT_EQ(document_boundary_token(model_with(-1, -1), nullptr), -1);
    // Two documents joined by EOS when the tokenizer says no BOS: "a" </s> "b" -> ▁a (263) 2 ▁b (289).
    const std::string corpus = std::string("a\n") + std::string(kDocumentSeparatorLine) + "\nb\n";
    EXPECT_EQ(tokenize_corpus(*off, corpus, document_boundary_token(model_with(1, 2), off.get())),
              (std::vector<int32_t>{263, 2, 289}));
}

TEST(SequenceStart, WindowsWithAndWithoutBos) {
    // stories260K has BOS 1; 10 text tokens, ctx 4.
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    std::vector<int32_t> tokens(10);
    for (int i = 0; i < 10; ++i) tokens[i] = 100 + i;
    PerplexityOptions options;
    options.ctx = 4;

    test::TempDir off_dir;
    const auto off = llama2_with_config(off_dir, R"({"add_bos_token": false})");
    const int32_t without = sequence_start_token(w.config, off.get());
    ASSERT_EQ(without, -1);
    // Without BOS a window is 4 text tokens and its first one is only context: [0,4) [4,8) [8,10) score 3 + 3 + 1.
    const auto plain = make_windows(10, options, without >= 0, model.max_positions());
    ASSERT_EQ(plain.size(), 3u);
    EXPECT_EQ(window_input(tokens, plain[0], without), (std::vector<int32_t>{100, 101, 102, 103}));
    DenseAttention dense;
    EXPECT_EQ(evaluate_perplexity(model, dense, tokens, without, options).n_scored, 7);

    const int32_t with = sequence_start_token(w.config, nullptr);
    ASSERT_EQ(with, 1);
    // With BOS a window is BOS + 3 text tokens, all scored: [0,3) [3,6) [6,9) [9,10) score 3 + 3 + 3 + 1.
    const auto bos_first = make_windows(10, options, with >= 0, model.max_positions());
    ASSERT_EQ(bos_first.size(), 4u);
    EXPECT_EQ(window_input(tokens, bos_first[0], with), (std::vector<int32_t>{1, 100, 101, 102}));
    EXPECT_EQ(evaluate_perplexity(model, dense, tokens, with, options).n_scored, 10);
}

}  // namespace
