// tests/common/db_rows.h: read a results database from a test, as an independent reader (the sqlite3 C API, not
// kascade's store).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

/// How long a test's read waits for a kascade process that holds the database (a test beside it filling a shared
/// results folder). Without it, a read that meets the last writer closing the WAL file gets SQLITE_BUSY at once.
constexpr int kTestDbBusyTimeoutMs = 60'000;

using DbRows = std::vector<std::vector<std::string>>;

/// Every row of a query on a database (read-only), each value as text ("NULL" for NULL); nullopt, with SQLite's
/// message in `error`, when the database cannot be opened or the query fails. For a test that polls a database another
/// process is still creating; the others use db_rows.
inline std::optional<DbRows> try_db_rows(const std::filesystem::path& db_file, const std::string& sql,
                                         std::string* error = nullptr) {
    sqlite3* db = nullptr;
    DbRows rows;
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db, kTestDbBusyTimeoutMs);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr);
    while (rc == SQLITE_OK || rc == SQLITE_ROW) {
        rc = sqlite3_step(stmt);
        if (rc != SQLITE_ROW) break;
        std::vector<std::string> row;
        for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
            const unsigned char* v = sqlite3_column_text(stmt, c);
            row.push_back(v != nullptr ? reinterpret_cast<const char*>(v) : "NULL");
        }
        rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE && error != nullptr) *error = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    if (rc != SQLITE_DONE) return std::nullopt;
    return rows;
}

/// Every row of a query on a database (read-only), each value as text ("NULL" for NULL). A database that cannot be
/// opened or a query that fails is a test failure (with SQLite's message), never a silently empty answer.
inline DbRows db_rows(const std::filesystem::path& db_file, const std::string& sql) {
    std::string error;
    std::optional<DbRows> rows = try_db_rows(db_file, sql, &error);
    if (!rows) {
        ADD_FAILURE() << db_file << ": " << error << " in " << sql;
        return {};
    }
    return std::move(*rows);
}

/// The first value of a query on a database (read-only), "" if the query gives no row.
inline std::string db_value(const std::filesystem::path& db_file, const std::string& sql) {
    const auto rows = db_rows(db_file, sql);
    return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}
