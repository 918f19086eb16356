// tests/pipeline/sweep_fixture.h: a small sweep over stories260K (seconds, not minutes) for the pipeline tests,
// helpers to read a results folder with plain sqlite3, and the check of a refused command's error.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/run_command.h"
#include "common/db_rows.h"

namespace fs = std::filesystem;

inline const fs::path kShared = KASCADE_SHARED_DIR;
inline const fs::path kStoriesBin = kShared / "models/stories260K/stories260K.bin";
inline const fs::path kStoriesTok = kShared / "models/stories260K/tok512.bin";
inline const fs::path kStoriesText = kShared / "data/tinystories/TinyStories-valid.head.txt";

/// ctx 128 (127 text tokens per window), calibration = 3 windows, test = 4 windows right after.
inline constexpr int kCalibTokens = 381;
inline constexpr int kTestTokens = 508;

inline std::string tiny_sweep_toml() {
    return "# pipeline test sweep\n"
           "[model]\npath = \"" +
           kStoriesBin.string() + "\"\ntokenizer = \"" + kStoriesTok.string() +
           "\"\n"
           "[text]\npath = \"" +
           kStoriesText.string() +
           "\"\n"
           "[calibration]\noffset = 0\ntokens = " +
           std::to_string(kCalibTokens) +
           "\n"
           "[test]\ntokens = " +
           std::to_string(kTestTokens) +
           "\n"
           "[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [2, 4]\n"
           "[[schedules]]\npolicy = \"threshold\"\nthreshold = [0.5, 0.95]\nmax_reuse_dist = 2\n"
           "[[schedules]]\npolicy = \"dp\"\nanchors = [2]\n"
           "[baselines]\nmethods = [\"dense\", \"oracle\", \"streaming\"]\n";
}

inline void write_text(const fs::path& path, const std::string& text) {
    std::ofstream(path) << text;
}

/// `s` with the first `from` replaced by `to`; a test failure if `from` is not there.
inline std::string replace_first(std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

/// The error contract of a refused command: non-zero exit, exactly one line on stderr, starting "kascade: error:",
/// containing `needle`.
inline void expect_error(const CommandResult& r, const std::string& needle) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

/// The results of every run, by run key: what an interrupted and resumed sweep must reproduce exactly.
inline std::map<std::string, std::string> run_results(const fs::path& results) {
    std::map<std::string, std::string> out;
    for (const auto& row : db_rows(results / "kascade.db",
                                   "SELECT r.key, r.method, m.n_scored, printf('%.12g', m.nll_sparse), "
                                   "printf('%.12g', m.nll_dense), printf('%.12g', m.density), "
                                   "(SELECT group_concat(printf('%s:%.9g', role, density)) FROM run_layers l "
                                   " WHERE l.run_id = r.id ORDER BY layer) "
                                   "FROM runs r JOIN run_metrics m ON m.run_id = r.id")) {
        std::string value;
        for (size_t i = 1; i < row.size(); ++i) value += row[i] + " ";
        out[row[0]] = value;
    }
    return out;
}
