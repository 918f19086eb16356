// tests/pipeline/test_sweep_tokenizer_config.cpp: a sweep on a Hugging Face model folder whose tokenizer has a
// tokenizer_config.json beside it (every Hub model has one). The config is part of the tokenizer's content hash (it
// decides BOS), so the sweep's plan must hash it as the stages do: otherwise every planned key differs from the key
// its stage stores, and the sweep stopped on an internal assertion at its first eval.
#include <gtest/gtest.h>

#include "sweep_fixture.h"

namespace {

const fs::path kLlama2Tokenizer = fs::path(KASCADE_SHARED_DIR) / "models/tokenizers/llama-2";

/// A 2-layer Llama with random weights at the Llama 2 tokenizer's vocabulary, with tokenizer.json and
/// tokenizer_config.json beside it as on the Hub.
void write_model(const fs::path& dir, const fs::path& scratch) {
    const fs::path config = scratch / "config.json";
    write_text(config,
               R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "vocab_size": 32000, "max_position_embeddings": 512,
                   "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
                   "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2})");
    const CommandResult made =
        run_kascade("random-model --config " + shell_quote(config) + " --out " + shell_quote(dir));
    ASSERT_EQ(made.exit_code, 0) << made.err;
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
        fs::copy_file(kLlama2Tokenizer / name, dir / name);
}

}  // namespace

TEST(SweepTokenizerConfig, ThePlannedKeysAreTheKeysTheStagesStore) {
    TempDir dir("sweep-tokenizer-config");
    const fs::path model = dir / "model", results = dir / "results", toml = dir / "sweep.toml";
    ASSERT_NO_FATAL_FAILURE(write_model(model, dir.path()));
    write_text(toml, "[model]\npath = \"" + model.string() + "\"\n[text]\npath = \"" + kStoriesText.string() +
                         "\"\n[calibration]\noffset = 0\ntokens = 508\n[test]\ntokens = 254\n"
                         "[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [2]\n"
                         "[[schedules]]\npolicy = \"dp\"\nanchors = [2]\n[baselines]\nmethods = [\"dense\"]\n");
    const CommandResult sweep =
        run_kascade("sweep " + shell_quote(toml) + " --results " + shell_quote(results) + " --no-report");
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err;
    // Planned again, every job is found stored under its planned key.
    const CommandResult again =
        run_kascade("sweep " + shell_quote(toml) + " --results " + shell_quote(results) + " --dry-run");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("5 jobs, 5 stored, 0 to compute"), std::string::npos) << again.out;
    // And they are the keys `kascade eval` computes: the dense run of the same tokens is found, not computed anew.
    const CommandResult eval =
        run_kascade("eval --results " + shell_quote(results) + " --model " + shell_quote(model) + " --text " +
                    shell_quote(kStoriesText) + " --method dense --ctx 128 --offset 508 --eval-tokens 254");
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    EXPECT_EQ(db_rows(results / "kascade.db", "SELECT count(*) FROM runs")[0][0], "2") << eval.out << eval.err;
}
