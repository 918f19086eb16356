// tests/pipeline/test_capture_artifact.cpp: a capture written by `kascade capture` opens with h5dump, has the layout
// results/README.md documents, and its pooled masses obey softmax's invariant: every query row contributes 1 per
// query head, so a (KV head, query tile) row sums to group size x rows in the tile.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "common/json_output.h"
#include "io/store/h5_file.h"
#include "sweep_fixture.h"

namespace {

class CaptureArtifact : public ::testing::Test {
  protected:
    TempDir dir_{"capture"};
    fs::path results_ = dir_ / "results";
    fs::path capture_file_;

    void SetUp() override {
        const CommandResult r = run_kascade("capture --results " + shell_quote(results_) + " --model " +
                                            shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) +
                                            " --calib-tokens 300 --ctx 100 --tile 16 --save-qk --json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const std::string key = json_string(r, "capture_key");
        capture_file_ = results_ / "artifacts/capture" / (key + ".h5");
        ASSERT_TRUE(fs::exists(capture_file_)) << r.out;
    }
};

TEST_F(CaptureArtifact, H5dumpShowsTheDocumentedLayout) {
    if (!fs::exists("/usr/bin/h5dump")) GTEST_SKIP() << "h5dump (hdf5-tools) is not installed";
    FILE* pipe = ::popen(("/usr/bin/h5dump -H " + shell_quote(capture_file_)).c_str(), "r");
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
    ASSERT_EQ(::pclose(pipe), 0);
    // stories260K: 5 layers, 8 heads, 4 KV heads, head_dim 8; 300 tokens at ctx 100 = 3 windows of 99; 7 tiles.
    for (const char* attr : {"format", "format_version", "stage", "key", "input_keys", "params", "model_hash",
                             "text_hash", "tokenizer_hash", "kascade_version", "git_commit", "created_at",
                             "token_offset", "n_tokens", "ctx", "tile", "n_windows", "importance", "window"}) {
        EXPECT_NE(out.find("ATTRIBUTE \"" + std::string(attr) + "\""), std::string::npos) << attr;
    }
    for (int l = 0; l < 5; ++l) EXPECT_NE(out.find("GROUP \"layer_0" + std::to_string(l) + "\""), std::string::npos);
    const std::regex tile_mass(
        R"(DATASET "tile_mass" \{\s*DATATYPE\s+H5T_IEEE_F32LE\s*DATASPACE\s+SIMPLE \{ \( 3, 4, 7, 7 \))");
    EXPECT_TRUE(std::regex_search(out, tile_mass)) << out.substr(0, 3000);
    EXPECT_TRUE(std::regex_search(
        out, std::regex(R"(DATASET "q" \{\s*DATATYPE\s+H5T_IEEE_F32LE\s*DATASPACE\s+SIMPLE \{ \( 3, 100, 8, 8 \))")));
    EXPECT_TRUE(std::regex_search(
        out, std::regex(R"(DATASET "k" \{\s*DATATYPE\s+H5T_IEEE_F32LE\s*DATASPACE\s+SIMPLE \{ \( 3, 4, 100, 8 \))")));
    EXPECT_TRUE(std::regex_search(
        out, std::regex(R"(DATASET "tokens" \{\s*DATATYPE\s+H5T_STD_I32LE\s*DATASPACE\s+SIMPLE \{ \( 297 \))")));
}

TEST_F(CaptureArtifact, PooledMassOfEveryQueryTileSumsToTheRowsPooled) {
    kascade::H5ArtifactReader reader(capture_file_, 2, 2, "capture");  // results/README.md: capture version 2
    const int ctx = 100, tile = 16, n_tiles = 7, group = 2, n_kv = 4;
    EXPECT_EQ(reader.root().attr_int("n_windows"), 3);
    for (int l = 0; l < 5; ++l) {
        const std::vector<float> mass =
            reader.root().open_group("layer_0" + std::to_string(l)).open_dataset("tile_mass").read<float>();
        ASSERT_EQ(mass.size(), static_cast<size_t>(3 * n_kv * n_tiles * n_tiles));
        for (int w = 0; w < 3; ++w)
            for (int h = 0; h < n_kv; ++h)
                for (int qt = 0; qt < n_tiles; ++qt) {
                    const float* row = mass.data() + ((static_cast<size_t>(w) * n_kv + h) * n_tiles + qt) * n_tiles;
                    double sum = 0;
                    for (int kt = 0; kt < n_tiles; ++kt) {
                        EXPECT_GE(row[kt], 0.0f);
                        if (kt > qt) {
                            EXPECT_EQ(row[kt], 0.0f) << "mass above the diagonal";
                        }
                        sum += row[kt];
                    }
                    const int rows = std::min(tile, ctx - qt * tile);
                    EXPECT_NEAR(sum, group * rows, 1e-3)
                        << "layer " << l << " window " << w << " head " << h << " tile " << qt;
                }
        const double importance = reader.root().open_group("layer_0" + std::to_string(l)).attr_double("importance");
        EXPECT_GT(importance, 0.0);
        EXPECT_LT(importance, 1.0);
        EXPECT_EQ(reader.root().open_group("layer_0" + std::to_string(l)).attr_int("window"), 0);  // no sliding window
    }
}

}  // namespace
