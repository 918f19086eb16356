// tests/pipeline/sweep_fixture.h: a small sweep over stories260K (seconds, not minutes) for the pipeline tests,
// and helpers to read a results folder with plain sqlite3.
#pragma once

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
