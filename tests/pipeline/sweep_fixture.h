// tests/pipeline/sweep_fixture.h: a small sweep over stories260K (seconds, not minutes) for the pipeline tests,
// and helpers to read a results folder with plain sqlite3.
#pragma once

#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/run_command.h"

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

/// Rows of a query on a results database, every value as text ("NULL" for NULL).
inline std::vector<std::vector<std::string>> sql_rows(const fs::path& db_file, const std::string& sql) {
    sqlite3* db = nullptr;
    std::vector<std::vector<std::string>> rows;
    if (sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return rows;
    }
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
        while (sqlite3_step(stmt) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
                const unsigned char* v = sqlite3_column_text(stmt, c);
                row.push_back(v != nullptr ? reinterpret_cast<const char*>(v) : "NULL");
            }
            rows.push_back(row);
        }
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return rows;
}

inline std::string sql_value(const fs::path& db_file, const std::string& sql) {
    const auto rows = sql_rows(db_file, sql);
    return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

/// The results of every run, by run key: what an interrupted and resumed sweep must reproduce exactly.
inline std::map<std::string, std::string> run_results(const fs::path& results) {
    std::map<std::string, std::string> out;
    for (const auto& row : sql_rows(results / "kascade.db",
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
