// tests/pipeline/test_pipeline_write_failure.cpp: an HDF5 artifact write that fails (a full disk, simulated with a
// file size limit) ends in the usual one-line error, removes its partial file, stores no row and does not crash.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include "sweep_fixture.h"

namespace {

/// Runs `kascade <args>` with files limited to `limit_kib` KiB; writing past the limit fails with EFBIG (SIGXFSZ
/// ignored) as writing to a full disk fails with ENOSPC.
CommandResult run_kascade_with_file_limit(const std::string& args, int limit_kib, const fs::path& err_file) {
    // POSIX sh counts ulimit -f in 512-byte blocks.
    const std::string command = "trap '' XFSZ; ulimit -f " + std::to_string(limit_kib * 2) + "; exec " +
                                shell_quote(KASCADE_BIN) + " " + args + " </dev/null 2>" + shell_quote(err_file);
    return run_shell(command, err_file);
}

TEST(WriteFailure, FullDiskDuringCaptureLeavesNoPartialFileAndNoRow) {
    TempDir dir{"write_failure"};
    const fs::path results = dir / "results";
    const std::string capture = "capture --results " + shell_quote(results) + " --model " + shell_quote(kStoriesBin) +
                                " --text " + shell_quote(kStoriesText) + " --calib-tokens 254 --ctx 128";
    const CommandResult first = run_kascade(capture);  // the database, before the limit
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const std::string db_file = (results / "kascade.db").string();
    ASSERT_EQ(db_value(db_file, "SELECT count(*) FROM artifacts"), "1");

    // With Q and K saved the artifact is far larger than the limit.
    const CommandResult r = run_kascade_with_file_limit(capture + " --offset 300 --save-qk", 64, dir / "err.txt");
    EXPECT_EQ(r.exit_code, 1) << r.err;  // an error, not a signal
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find((results / "artifacts" / "capture").string()), std::string::npos) << r.err;
    int files = 0;
    for (const auto& e : fs::recursive_directory_iterator(results / "artifacts")) {
        if (!e.is_regular_file()) continue;
        ++files;
        EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
    }
    EXPECT_EQ(files, 1);
    EXPECT_EQ(db_value(db_file, "SELECT count(*) FROM artifacts"), "1");
}

}  // namespace
