// io/store/table_format.h: read-only SQL queries on results/kascade.db and their output as table, CSV, JSON or
// markdown (the back end of `kascade query`).
//
// Queries run on a separate read-only connection and must be a single read-only statement (checked with
// sqlite3_stmt_readonly), so `kascade query` can never change the results, whatever SQL the user types.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

struct sqlite3;

namespace kascade {

/// One cell: NULL, INTEGER, REAL or TEXT (BLOBs are shown as "<blob N bytes>").
using QueryValue = std::variant<std::monostate, std::int64_t, double, std::string>;

struct QueryResult {
    std::vector<std::string> columns;
    std::vector<std::vector<QueryValue>> rows;  ///< rows[i].size() == columns.size()
};

/// A read-only connection to a results database.
class QueryDb {
  public:
    /// Opens db_file read-only; throws kascade::Error if it does not exist or is not a database. A database of an
    /// older schema version is read as an in-memory copy migrated forward (the file is not changed).
    explicit QueryDb(const std::filesystem::path& db_file);
    ~QueryDb();
    QueryDb(const QueryDb&) = delete;
    QueryDb& operator=(const QueryDb&) = delete;

    /// Runs one read-only statement (SELECT, WITH ... SELECT, read-only PRAGMA). Throws kascade::Error with
    /// SQLite's message for invalid SQL, and refuses statements that would write and trailing statements.
    /// Messages start with error_prefix, by default: query "<sql>".
    QueryResult select(std::string_view sql, std::string_view error_prefix = {});
    /// The column names of a table or view, in order.
    std::vector<std::string> columns_of(std::string_view table);

  private:
    /// Replaces the connection by an in-memory copy of the database migrated from `version` to kSchemaVersion.
    void read_migrated_copy(int version);

    std::filesystem::path db_file_;
    sqlite3* db_ = nullptr;
};

enum class OutputFormat { Table, Csv, Json, Markdown };

/// Parses "table", "csv", "json" or "markdown" (also "md"); throws naming the choices otherwise.
OutputFormat parse_output_format(std::string_view name);

/// A text as a terminal shows it safely, every byte kept: backslash, tab, CR and LF as \\ \t \r \n, other
/// control bytes (NUL, ESC, DEL) and bytes that are not UTF-8 as \xNN, C1 controls, line separators and
/// bidirectional controls as \uNNNN. What tables and markdown show of a value, and what an error message shows of
/// a refused one.
std::string escape_for_display(std::string_view s);

/// Formats a result; every format carries every row and every byte of every value, or refuses:
///  - Table: aligned columns for a terminal, numbers right-aligned, REAL with 6 significant digits, NULL as "-";
///    text escaped so that nothing reaches the terminal raw: \\ \t \r \n, other control bytes (NUL, ESC, DEL)
///    and bytes that are not UTF-8 as \xNN, C1 controls, line separators and bidirectional controls as \uNNNN.
///  - Csv: RFC 4180: a header record, records ending in CRLF, fields holding , " or any control byte quoted
///    (quotes doubled), NULL as empty, REAL with full (round-trip) precision. A value or column name holding a NUL
///    byte is refused (kascade::Error naming its row and column).
///  - Json: an array of objects keyed by column name in column order, one per line; NULL and non-finite REAL as
///    null; control characters escaped (\u0000, and DEL, C1 and bidirectional controls too); text that is not
///    UTF-8 has U+FFFD in place of its bad bytes; a repeated column name gets a suffix "_2", "_3", ...
///  - Markdown: a GitHub table, numeric columns right-aligned, escaped like Table, "|" escaped.
/// Table and Markdown end with "\n", Csv with "\r\n", Json with "]\n".
std::string format_result(const QueryResult& result, OutputFormat format);

/// Writes format_result(result, format) to `out` whole (a NUL in it does not end it); throws if it cannot.
void write_result(std::FILE* out, const QueryResult& result, OutputFormat format);

/// `kascade query runs`: which columns of runs_flat, which rows, which order.
struct RunsQuery {
    std::vector<std::string> columns;  ///< empty: default_runs_columns()
    std::string where;                 ///< SQL expression on runs_flat columns, or empty
    std::string order_by;              ///< "col [asc|desc], ..." or empty (then: by id)
    std::int64_t limit = 0;            ///< 0: no limit
};

/// id, method, policy, threshold, n_anchors, topk_tiles, topk_pct, tile, ctx, ppl_dense, ppl_sparse,
/// degradation_pct, density, tokens_per_s.
const std::vector<std::string>& default_runs_columns();

/// Builds "SELECT <cols> FROM runs_flat [WHERE (<where>)] ORDER BY <order> [LIMIT n]". Column names (in columns
/// and order_by) must be among `available` (the columns of runs_flat); an unknown one throws
/// "unknown column 'x' in --order-by; did you mean 'y'? columns are: ...".
std::string runs_query_sql(const RunsQuery& query, const std::vector<std::string>& available);

/// Builds and runs a RunsQuery on db's runs_flat. An invalid --where expression throws SQLite's message
/// prefixed with the expression as the user typed it.
QueryResult query_runs(QueryDb& db, const RunsQuery& query);

/// Mean task scores per task run and prompt length (and needle depth), from task_samples_flat, rows selected by
/// `where` (an SQL condition on its columns; "" = all). An invalid condition throws SQLite's message naming --where.
QueryResult query_task_scores(QueryDb& db, const std::string& where, bool by_depth);

/// Mean dataset scores per dataset task run (LongBench prints score x 100; this is in [0, 1]), from
/// dataset_samples_flat, with the share of prompts cut in the middle; `where` as for query_task_scores.
QueryResult query_dataset_scores(QueryDb& db, const std::string& where);

}  // namespace kascade
