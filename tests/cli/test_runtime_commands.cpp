// tests/cli/test_runtime_commands.cpp: `kascade generate`, `perplexity` and `tokenize` end to end, against
// published outputs, and their behaviour on bad input (one-line error naming the file, non-zero exit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "run_command.h"

namespace fs = std::filesystem;

namespace {

const fs::path kShared = KASCADE_SHARED_DIR;
const fs::path kBin = kShared / "models/stories260K/stories260K.bin";
const fs::path kTok = kShared / "models/stories260K/tok512.bin";
const fs::path kHfDir = kShared / "models/stories260K-hf";
const fs::path kWiki = kShared / "data/wikitext-2/wiki.test.raw";

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The error contract: non-zero exit, exactly one line on stderr, starting "kascade: error:", containing `needle`.
void expect_one_line_error(const CommandResult& r, const std::string& needle) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

TEST(GenerateCommand, GreedyFromLlama2cCheckpointMatchesPublishedOutput) {
    const auto r =
        run_kascade("generate --model " + shell_quote(kBin) + " --tokenizer " + shell_quote(kTok) + " -n 256 --greedy");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, read_all(kShared / "models/stories260K/greedy-reference.txt"));
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST(GenerateCommand, GreedyFromHuggingFaceDirectoryMatchesPublishedOutput) {
    // No --tokenizer: the tok512.bin inside the directory is found automatically.
    const auto r = run_kascade("generate --model " + shell_quote(kHfDir) + " -n 256 --greedy");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, read_all(kShared / "models/stories260K/greedy-reference.txt"));
}

nlohmann::json perplexity_json(const fs::path& model) {
    const auto r = run_kascade("perplexity --model " + shell_quote(model) + " --tokenizer " + shell_quote(kTok) +
                               " --text " + shell_quote(kWiki) + " --ctx 512 --max-tokens 16384 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
}

TEST(PerplexityCommand, BothFormatsOfStories260kAgreeOnWikiText) {
    const nlohmann::json bin = perplexity_json(kBin);
    const nlohmann::json hf = perplexity_json(kHfDir);
    EXPECT_EQ(bin["tokens"].get<int>(), 16384);
    EXPECT_EQ(hf["tokens"].get<int>(), 16384);
    const double ppl_bin = bin["ppl"], ppl_hf = hf["ppl"];
    EXPECT_LT(std::abs(ppl_bin - ppl_hf) / ppl_bin, 1e-5) << ppl_bin << " vs " << ppl_hf;
    EXPECT_NEAR(std::log(ppl_bin), bin["nll"].get<double>(), 1e-9);
    // A 260K-parameter model trained on children's stories is poor on Wikipedia, but not random (ln 512 = 6.24).
    EXPECT_GT(bin["nll"].get<double>(), 2.0);
    EXPECT_LT(bin["nll"].get<double>(), 6.24);
}

TEST(PerplexityCommand, InDomainTextIsNearThePublishedValidationLoss) {
    // stories260K's published TinyStories validation loss is 1.2968 nats (llama2.c: each story stripped, BOS first)
    // on another shard; the same domain, with stories split at their <|endoftext|> lines, must land near it.
    const auto r = run_kascade("perplexity --model " + shell_quote(kBin) + " --text " +
                               shell_quote(kShared / "data/tinystories/TinyStories-valid.head.txt") +
                               " --ctx 512 --max-tokens 8192 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double nll = nlohmann::json::parse(r.out)["nll"];
    EXPECT_NEAR(nll, 1.2968, 0.1);
}

TEST(TokenizeCommand, PrintsIdsAsJson) {
    const auto r = run_kascade("tokenize --tokenizer " + shell_quote(kTok) + " --string 'Once upon a time' --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["count"].get<size_t>(), j["tokens"].size());
    EXPECT_GT(j["count"].get<int>(), 0);
}

// ---- bad input ---------------------------------------------------------------------------------------------------

TEST(BadInput, MissingModelFile) {
    const auto r = run_kascade("perplexity --model /nonexistent/model.bin --tokenizer " + shell_quote(kTok) +
                               " --text " + shell_quote(kWiki));
    expect_one_line_error(r, "/nonexistent/model.bin");
}

TEST(BadInput, EmptyTextFile) {
    TempDir dir("empty_text");
    std::ofstream(dir / "empty.txt").close();
    const auto r = run_kascade("perplexity --model " + shell_quote(kBin) + " --text " + shell_quote(dir / "empty.txt"));
    expect_one_line_error(r, "empty.txt");
    EXPECT_NE(r.err.find("empty"), std::string::npos);
}

TEST(BadInput, ContextLargerThanTheModels) {
    const auto r = run_kascade("perplexity --model " + shell_quote(kBin) + " --text " + shell_quote(kWiki) +
                               " --ctx 1024 --max-tokens 2048");
    expect_one_line_error(r, "--ctx 1024");
    EXPECT_NE(r.err.find("512"), std::string::npos) << r.err;
}

/// A copy of the stories260K HF directory whose safetensors file or config the test then damages.
class DamagedHfModel : public ::testing::Test {
  protected:
    TempDir dir_{"damaged_hf"};
    void SetUp() override {
        for (const char* f : {"config.json", "model.safetensors", "tok512.bin"}) fs::copy_file(kHfDir / f, dir_ / f);
    }
    std::string safetensors_header() {
        std::ifstream in(dir_ / "model.safetensors", std::ios::binary);
        uint64_t n = 0;
        in.read(reinterpret_cast<char*>(&n), 8);
        std::string h(n, '\0');
        in.read(h.data(), static_cast<std::streamsize>(n));
        return h;
    }
    /// Rewrites the header (JSON) keeping the data region as it is.
    void rewrite_header(const nlohmann::json& header) {
        const std::string old_header = safetensors_header();
        const std::string all = read_all(dir_ / "model.safetensors");
        const std::string data = all.substr(8 + old_header.size());
        std::string h = header.dump();
        h.append((8 - h.size() % 8) % 8, ' ');
        const uint64_t n = h.size();
        std::ofstream out(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << h << data;
    }
    CommandResult run_perplexity() {
        return run_kascade("perplexity --model " + shell_quote(dir_.path()) + " --text " + shell_quote(kWiki) +
                           " --max-tokens 600");
    }
};

TEST_F(DamagedHfModel, TruncatedSafetensors) {
    fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 1000);
    expect_one_line_error(run_perplexity(), "model.safetensors");
}

TEST_F(DamagedHfModel, OverlappingOffsets) {
    nlohmann::json h = nlohmann::json::parse(safetensors_header());
    auto& a = h["model.layers.0.self_attn.q_proj.weight"]["data_offsets"];
    auto& b = h["model.layers.0.self_attn.k_proj.weight"]["data_offsets"];
    b = {a[0].get<uint64_t>() + 4, a[0].get<uint64_t>() + 4 + (b[1].get<uint64_t>() - b[0].get<uint64_t>())};
    rewrite_header(h);
    const auto r = run_perplexity();
    expect_one_line_error(r, "model.safetensors");
    EXPECT_NE(r.err.find("overlap"), std::string::npos) << r.err;
}

TEST_F(DamagedHfModel, OffsetsPastTheEnd) {
    nlohmann::json h = nlohmann::json::parse(safetensors_header());
    h["model.norm.weight"]["data_offsets"] = {2000000, 2000256};
    rewrite_header(h);
    expect_one_line_error(run_perplexity(), "model.norm.weight");
}

TEST_F(DamagedHfModel, UnknownDtype) {
    nlohmann::json h = nlohmann::json::parse(safetensors_header());
    h["model.norm.weight"]["dtype"] = "F8_E4M3";
    rewrite_header(h);
    const auto r = run_perplexity();
    expect_one_line_error(r, "F8_E4M3");
}

TEST_F(DamagedHfModel, ShapesDisagreeWithConfig) {
    nlohmann::json config = nlohmann::json::parse(read_all(dir_ / "config.json"));
    config["num_key_value_heads"] = 2;
    std::ofstream(dir_ / "config.json") << config.dump();
    const auto r = run_perplexity();
    expect_one_line_error(r, "k_proj");
}

TEST_F(DamagedHfModel, ConfigWithFewerLayersThanTheWeights) {
    // A config.json saying 4 layers over 5-layer weights must not load silently (it would run another network).
    nlohmann::json config = nlohmann::json::parse(read_all(dir_ / "config.json"));
    config["num_hidden_layers"] = 4;
    std::ofstream(dir_ / "config.json") << config.dump();
    const auto r = run_perplexity();
    expect_one_line_error(r, "model.layers.4.");
    EXPECT_NE(r.err.find("num_hidden_layers = 4"), std::string::npos) << r.err;
}

TEST_F(DamagedHfModel, NanWeightsStopPerplexity) {
    // Every value of the final norm weight NaN: the logits are NaN, and the perplexity must be an error, not "nan".
    const nlohmann::json h = nlohmann::json::parse(safetensors_header());
    const auto offsets = h["model.norm.weight"]["data_offsets"];
    std::string all = read_all(dir_ / "model.safetensors");
    const size_t begin = 8 + safetensors_header().size() + offsets[0].get<size_t>();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = begin; i < 8 + safetensors_header().size() + offsets[1].get<size_t>(); i += 4) {
        std::memcpy(all.data() + i, &nan, 4);
    }
    std::ofstream(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc) << all;
    const auto r = run_perplexity();
    expect_one_line_error(r, "non-finite logits");
    EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(BadInput, UnknownCommandIsNamedWithTheClosestOne) {
    expect_one_line_error(run_kascade("frobnicate"), "unknown command 'frobnicate'");
    expect_one_line_error(run_kascade("perplxity --model x"), "did you mean 'perplexity'?");
}

TEST(BadInput, TokenizerLargerThanTheModelIsNamed) {
    const fs::path smollm2 = kShared / "models/smollm2-135m-tokenizer/tokenizer.json";
    const auto r = run_kascade("perplexity --model " + shell_quote(kBin) + " --tokenizer " + shell_quote(smollm2) +
                               " --text " + shell_quote(kWiki) + " --max-tokens 600");
    expect_one_line_error(r, smollm2.string());
    EXPECT_NE(r.err.find("49152"), std::string::npos) << r.err;
}

TEST(BadInput, UnknownWeightsDtypeAndMatmul) {
    expect_one_line_error(run_kascade("perplexity --model " + shell_quote(kBin) + " --text " + shell_quote(kWiki) +
                                      " --weights-dtype f64"),
                          "--weights-dtype \"f64\" is not a weights dtype (expected file, f32 or bf16)");
    expect_one_line_error(
        run_kascade("perplexity --model " + shell_quote(kBin) + " --text " + shell_quote(kWiki) + " --matmul int8"),
        "--matmul \"int8\"");
}

}  // namespace
