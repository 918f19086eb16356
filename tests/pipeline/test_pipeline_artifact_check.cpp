// tests/pipeline/test_pipeline_artifact_check.cpp: artifact files are checked against their rows when opened and
// by `kascade status`; a deleted artifact file is made again, not reported cached.
#include <gtest/gtest.h>

#include <sstream>

#include "common/json_output.h"
#include "sweep_fixture.h"

namespace {

class ArtifactCheck : public ::testing::Test {
  protected:
    TempDir dir_{"artifact_check"};
    fs::path results_ = dir_ / "results";
    fs::path db_file_ = results_ / "kascade.db";

    std::string results_arg() const { return " --results " + shell_quote(results_); }
    /// A capture of 254 calibration tokens from `offset`; returns its key.
    std::string capture(int offset) {
        const CommandResult c = run_kascade(
            "capture" + results_arg() + " --model " + shell_quote(kStoriesBin) + " --text " +
            shell_quote(kStoriesText) + " --calib-tokens 254 --ctx 128 --offset " + std::to_string(offset) + " --json");
        return json_string(c, "capture_key");
    }
    std::string similarity(const std::string& capture_key) {
        const CommandResult s = run_kascade("similarity" + results_arg() + " --capture " + capture_key +
                                            " --topk-tiles 2 --key-granularity tile --json");
        return json_string(s, "similarity_key");
    }
    CommandResult schedule(const std::string& similarity_key) {
        return run_kascade("schedule" + results_arg() + " --similarity " + similarity_key + " --policy dp --anchors 2");
    }
    fs::path file(const std::string& stage, const std::string& key) const {
        return results_ / "artifacts" / stage / (key + ".h5");
    }
    /// The status line of the artifact with this key.
    std::string status_line(const std::string& status, const std::string& key) const {
        std::istringstream lines(status);
        for (std::string line; std::getline(lines, line);) {
            if (line.find(key) != std::string::npos) return line;
        }
        return "";
    }
};

TEST_F(ArtifactCheck, CaptureFileReplacedByAnotherCaptureIsRefused) {
    const std::string a = capture(0), b = capture(300);
    ASSERT_NE(a, b);
    fs::copy_file(file("capture", b), file("capture", a), fs::copy_options::overwrite_existing);
    const auto r =
        run_kascade("similarity" + results_arg() + " --capture " + a + " --topk-tiles 2 --key-granularity tile");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(file("capture", a).string()), std::string::npos) << r.err;
    // Its checksum differs from the one recorded for it: refused before libhdf5 opens it.
    EXPECT_NE(r.err.find(": damaged or replaced: its checksum is"), std::string::npos) << r.err;
    EXPECT_EQ(db_value(db_file_, "SELECT count(*) FROM artifacts WHERE stage = 'similarity'"), "0");
    EXPECT_FALSE(fs::exists(results_ / "artifacts" / "similarity"));
}

TEST_F(ArtifactCheck, DamagedFileIsRefusedByItsChecksumAndStatusSaysSo) {
    const std::string a = capture(0);
    const fs::path f = file("capture", a);
    // One byte in the middle changed: the size and the root attributes are as stored.
    const auto middle = static_cast<std::streamoff>(fs::file_size(f) / 2);
    {
        std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
        io.seekg(middle);
        const char c = static_cast<char>(io.get());
        io.seekp(middle);
        io.put(static_cast<char>(c ^ 0x5a));
    }
    const auto r =
        run_kascade("similarity" + results_arg() + " --capture " + a + " --topk-tiles 2 --key-granularity tile");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kascade: error: " + f.string() + ": damaged or replaced: its checksum is ", 0), 0u) << r.err;
    EXPECT_EQ(db_value(db_file_, "SELECT count(*) FROM artifacts WHERE stage = 'similarity'"), "0");

    const auto s = run_kascade("status" + results_arg());
    ASSERT_EQ(s.exit_code, 0) << s.err;
    EXPECT_NE(status_line(s.out, a).find("damaged"), std::string::npos) << s.out;
}

TEST_F(ArtifactCheck, StatusMarksTruncatedCorruptAndReplacedFiles) {
    const std::string a = capture(0), b = capture(300), c = capture(600), sim = similarity(a);
    fs::copy_file(file("capture", b), file("capture", a), fs::copy_options::overwrite_existing);  // wrong key
    fs::resize_file(file("capture", c), fs::file_size(file("capture", c)) / 2);                   // truncated
    {
        std::string noise(fs::file_size(file("similarity", sim)), '\0');
        for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919 + 13) % 251);
        std::ofstream(file("similarity", sim), std::ios::binary) << noise;  // random bytes, same size
    }
    const auto r = run_kascade("status" + results_arg());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string& key : {a, c, sim}) {
        const std::string line = status_line(r.out, key);
        EXPECT_NE(line.find("bad"), std::string::npos) << key << " in:\n" << r.out;
        EXPECT_EQ(line.find(" ok"), std::string::npos) << key << " in:\n" << r.out;
    }
    EXPECT_NE(status_line(r.out, b).find(" ok"), std::string::npos) << r.out;
}

TEST_F(ArtifactCheck, DeletedScheduleFileIsMadeAgain) {
    const std::string sim = similarity(capture(0));
    const CommandResult first = schedule(sim);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const std::string key = db_value(db_file_, "SELECT key FROM schedules");
    ASSERT_TRUE(fs::exists(file("schedule", key)));
    fs::remove(file("schedule", key));
    const CommandResult again = schedule(sim);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(again.out.find("(cached)"), std::string::npos) << again.out;
    EXPECT_TRUE(fs::exists(file("schedule", key)));
    EXPECT_EQ(again.out, first.out);  // the same schedule, under the same id
    EXPECT_EQ(db_value(db_file_, "SELECT count(*) FROM schedules"), "1");
}

}  // namespace
