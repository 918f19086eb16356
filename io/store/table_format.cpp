// io/store/table_format.cpp: read-only queries on the results database and their text formats (see table_format.h).
#include "io/store/table_format.h"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/closest_match.h"
#include "base/error.h"
#include "io/store/results_db.h"
#include "io/store/schema.h"

namespace kascade {

namespace {

namespace fs = std::filesystem;

struct StmtDeleter {
    void operator()(sqlite3_stmt* st) const { sqlite3_finalize(st); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

// Runs one read-only statement; errors read "<error_prefix>: <reason>".
QueryResult run_select(sqlite3* db, std::string_view sql, std::string_view error_prefix) {
    auto describe = [&](std::string_view reason) { return fmt::format("{}: {}", error_prefix, reason); };
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, &tail);
    StmtPtr st(raw);
    if (rc != SQLITE_OK) throw Error(describe(sqlite3_errmsg(db)));
    if (st == nullptr) throw Error(describe("the query is empty"));
    // Whatever follows the first statement must be blank or comments: preparing it must yield no statement.
    std::string_view rest = sql.substr(static_cast<std::size_t>(tail - sql.data()));
    rest.remove_prefix(std::min(rest.find_first_not_of(" \t\r\n;"), rest.size()));
    if (!rest.empty()) {
        sqlite3_stmt* next = nullptr;
        int rc_next = sqlite3_prepare_v2(db, rest.data(), static_cast<int>(rest.size()), &next, nullptr);
        StmtPtr next_st(next);
        if (rc_next != SQLITE_OK || next_st != nullptr) {
            throw Error(describe("only one statement can be run per query"));
        }
    }
    if (sqlite3_stmt_readonly(st.get()) == 0) {
        throw Error(describe("refusing a statement that writes; queries are read-only (SELECT, WITH, PRAGMA x)"));
    }

    QueryResult result;
    const int n_cols = sqlite3_column_count(st.get());
    for (int c = 0; c < n_cols; ++c) result.columns.emplace_back(sqlite3_column_name(st.get(), c));
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        std::vector<QueryValue>& row = result.rows.emplace_back();
        row.reserve(static_cast<std::size_t>(n_cols));
        for (int c = 0; c < n_cols; ++c) {
            switch (sqlite3_column_type(st.get(), c)) {
                case SQLITE_INTEGER:
                    row.emplace_back(std::int64_t{sqlite3_column_int64(st.get(), c)});
                    break;
                case SQLITE_FLOAT:
                    row.emplace_back(sqlite3_column_double(st.get(), c));
                    break;
                case SQLITE_TEXT:
                    row.emplace_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st.get(), c)),
                                                 static_cast<std::size_t>(sqlite3_column_bytes(st.get(), c))));
                    break;
                case SQLITE_BLOB:
                    row.emplace_back(fmt::format("<blob {} bytes>", sqlite3_column_bytes(st.get(), c)));
                    break;
                default:
                    row.emplace_back(std::monostate{});
                    break;
            }
        }
    }
    if (rc != SQLITE_DONE) throw Error(describe(sqlite3_errmsg(db)));
    return result;
}

// ---- Cell rendering ----

bool is_number(const QueryValue& v) {
    return std::holds_alternative<std::int64_t>(v) || std::holds_alternative<double>(v);
}

// A column is right-aligned if it has at least one value and all its values are numbers.
std::vector<bool> numeric_columns(const QueryResult& r) {
    std::vector<bool> numeric(r.columns.size(), false);
    for (std::size_t c = 0; c < r.columns.size(); ++c) {
        bool any = false;
        bool all = true;
        for (const auto& row : r.rows) {
            if (std::holds_alternative<std::monostate>(row[c])) continue;
            any = true;
            all = all && is_number(row[c]);
        }
        numeric[c] = any && all;
    }
    return numeric;
}

/// The length of the valid UTF-8 sequence at s[i] and its code point; 0 if the bytes there are not valid UTF-8.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t& code) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char lead = byte(i);
    std::size_t n = 0;
    std::uint32_t min = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        n = 2, code = lead & 0x1Fu, min = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        n = 3, code = lead & 0x0Fu, min = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        n = 4, code = lead & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80) return 0;
        code = code << 6 | (byte(i + k) & 0x3Fu);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return n;
}

/// Code points that change how a terminal or an editor shows the text around them: C1 controls (U+0080..U+009F,
/// CSI among them), line and paragraph separators, and the bidirectional overrides and isolates.
bool is_invisible_control(std::uint32_t code) {
    return (code >= 0x80 && code <= 0x9F) || code == 0x2028 || code == 0x2029 || (code >= 0x202A && code <= 0x202E) ||
           (code >= 0x2066 && code <= 0x2069);
}

}  // namespace

std::string escape_for_display(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7F) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c < 0x80) {
            out += static_cast<char>(c);
        } else {
            std::uint32_t code = 0;
            const std::size_t n = utf8_sequence(s, i, code);
            if (n == 0) {
                out += fmt::format("\\x{:02x}", c);
            } else {
                if (is_invisible_control(code))
                    out += fmt::format("\\u{:04x}", code);
                else
                    out.append(s.substr(i, n));
                i += n;
                continue;
            }
        }
        ++i;
    }
    return out;
}

namespace {

/// JSON text (valid UTF-8, control bytes below 0x20 already escaped) with DEL, C1 controls, line separators and
/// bidirectional controls escaped too (\uNNNN), so that it shows on a terminal as it is.
std::string escape_json_controls(const std::string& json) {
    std::string out;
    out.reserve(json.size());
    for (std::size_t i = 0; i < json.size();) {
        const unsigned char c = static_cast<unsigned char>(json[i]);
        std::uint32_t code = c;
        const std::size_t n = c < 0x80 ? 1 : utf8_sequence(json, i, code);
        if (n > 0 && (code == 0x7F || is_invisible_control(code))) {
            out += fmt::format("\\u{:04x}", code);
        } else {
            out.append(json, i, std::max<std::size_t>(n, 1));
        }
        i += std::max<std::size_t>(n, 1);
    }
    return out;
}

// Terminal/markdown text of a cell: 6 significant digits for REAL, "-" for NULL, text escaped for display.
std::string display_text(const QueryValue& v) {
    if (std::holds_alternative<std::monostate>(v)) return "-";
    if (const auto* i = std::get_if<std::int64_t>(&v)) return fmt::format("{}", *i);
    if (const auto* d = std::get_if<double>(&v)) return fmt::format("{:.6g}", *d);
    return escape_for_display(std::get<std::string>(v));
}

// Display width in a terminal: UTF-8 code points (continuation bytes 10xxxxxx do not count).
std::size_t display_width(std::string_view s) {
    return static_cast<std::size_t>(
        std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, std::size_t width, bool right) {
    const std::string fill(width - std::min(width, display_width(s)), ' ');
    return right ? fill + s : s + fill;
}

void rtrim(std::string& s) {
    s.erase(s.find_last_not_of(' ') + 1);
}

// Cells as displayed, with the header as row 0, and each column's width.
struct Grid {
    std::vector<std::vector<std::string>> cells;
    std::vector<std::size_t> widths;
};

Grid make_grid(const QueryResult& r, const std::function<std::string(std::string)>& escape) {
    Grid g;
    std::vector<std::string>& header = g.cells.emplace_back();
    for (const std::string& name : r.columns) header.push_back(escape(escape_for_display(name)));
    for (const auto& row : r.rows) {
        std::vector<std::string>& line = g.cells.emplace_back();
        for (const auto& v : row) line.push_back(escape(display_text(v)));
    }
    g.widths.assign(r.columns.size(), 0);
    for (const auto& line : g.cells) {
        for (std::size_t c = 0; c < line.size(); ++c) g.widths[c] = std::max(g.widths[c], display_width(line[c]));
    }
    return g;
}

std::string format_table(const QueryResult& r) {
    const std::vector<bool> numeric = numeric_columns(r);
    const Grid g = make_grid(r, [](std::string s) { return s; });
    std::string out;
    auto emit = [&](const std::vector<std::string>& line) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            if (c > 0) text += "  ";
            text += pad(line[c], g.widths[c], numeric[c]);
        }
        rtrim(text);
        out += text + "\n";
    };
    emit(g.cells[0]);
    std::vector<std::string> rule;
    for (std::size_t w : g.widths) rule.emplace_back(w, '-');
    emit(rule);
    for (std::size_t i = 1; i < g.cells.size(); ++i) emit(g.cells[i]);
    return out;
}

std::string format_markdown(const QueryResult& r) {
    const std::vector<bool> numeric = numeric_columns(r);
    Grid g = make_grid(r, [](std::string s) {
        std::string escaped;
        for (char ch : s) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
        return escaped;
    });
    for (std::size_t& w : g.widths) w = std::max<std::size_t>(w, 3);
    std::string out;
    auto emit = [&](const std::vector<std::string>& line) {
        out += "|";
        for (std::size_t c = 0; c < line.size(); ++c) {
            out += ' ';
            out += pad(line[c], g.widths[c], numeric[c]);
            out += " |";
        }
        out += "\n";
    };
    emit(g.cells[0]);
    out += "|";
    for (std::size_t c = 0; c < g.widths.size(); ++c) {
        out += numeric[c] ? std::string(g.widths[c] + 1, '-') + ":|" : std::string(g.widths[c] + 2, '-') + "|";
    }
    out += "\n";
    for (std::size_t i = 1; i < g.cells.size(); ++i) emit(g.cells[i]);
    return out;
}

/// One RFC 4180 field: quoted (quotes doubled) when it holds a comma, a quote, CR, LF or any other control byte.
/// NUL cannot be carried (CSV readers stop or fail there): refused, naming where it is.
std::string csv_field(const std::string& s, const std::function<std::string()>& where) {
    KASCADE_CHECK(s.find('\0') == std::string::npos,
                  "{} holds a NUL byte, which CSV cannot carry; use --format json (it escapes it as \\u0000)", where());
    const bool quote = std::any_of(s.begin(), s.end(), [](char ch) {
        const unsigned char c = static_cast<unsigned char>(ch);
        return c == ',' || c == '"' || c < 0x20 || c == 0x7F;
    });
    if (!quote) return s;
    std::string quoted = "\"";
    for (char ch : s) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return quoted + "\"";
}

/// RFC 4180: a header record, then one record per row, every record ending in CRLF.
std::string format_csv(const QueryResult& r) {
    std::string out;
    for (std::size_t c = 0; c < r.columns.size(); ++c) {
        if (c > 0) out += ',';
        out += csv_field(r.columns[c], [&] { return fmt::format("the name of column {}", c + 1); });
    }
    out += "\r\n";
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        for (std::size_t c = 0; c < r.rows[i].size(); ++c) {
            if (c > 0) out += ',';
            const QueryValue& v = r.rows[i][c];
            std::string text;
            if (const auto* n = std::get_if<std::int64_t>(&v)) {
                text = fmt::format("{}", *n);
            } else if (const auto* d = std::get_if<double>(&v)) {
                text = fmt::format("{}", *d);  // shortest round-trip
            } else if (const auto* t = std::get_if<std::string>(&v)) {
                text = *t;
            }
            out += csv_field(text, [&] { return fmt::format("row {}, column {}", i + 1, r.columns[c]); });
        }
        out += "\r\n";
    }
    return out;
}

std::string format_json(const QueryResult& r) {
    // Keys must be unique within an object: "id", "id" becomes "id", "id_2".
    std::vector<std::string> keys;
    for (const std::string& name : r.columns) {
        std::string key = name;
        for (int n = 2; std::find(keys.begin(), keys.end(), key) != keys.end(); ++n)
            key = fmt::format("{}_{}", name, n);
        keys.push_back(key);
    }
    std::string out = "[";
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        nlohmann::ordered_json obj = nlohmann::ordered_json::object();
        for (std::size_t c = 0; c < keys.size(); ++c) {
            const QueryValue& v = r.rows[i][c];
            if (const auto* n = std::get_if<std::int64_t>(&v)) {
                obj[keys[c]] = *n;
            } else if (const auto* d = std::get_if<double>(&v)) {
                obj[keys[c]] = std::isfinite(*d) ? nlohmann::ordered_json(*d) : nlohmann::ordered_json(nullptr);
            } else if (const auto* s = std::get_if<std::string>(&v)) {
                obj[keys[c]] = *s;
            } else {
                obj[keys[c]] = nullptr;
            }
        }
        out += i == 0 ? "\n" : ",\n";
        out += escape_json_controls(obj.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    }
    out += r.rows.empty() ? "]\n" : "\n]\n";
    return out;
}

std::string trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// Throws "unknown column 'x' in <option>; did you mean 'y'? columns are: ..." unless name is available.
void check_column(const std::string& name, std::string_view option, const std::vector<std::string>& available) {
    if (std::find(available.begin(), available.end(), name) != available.end()) return;
    const std::string suggestion = closest_match(name, available);
    const std::string hint = suggestion.empty() ? "" : fmt::format("did you mean '{}'? ", suggestion);
    KASCADE_FAIL("unknown column '{}' in {}; {}columns are: {}", name, option, hint, fmt::join(available, ", "));
}

}  // namespace

// ---- QueryDb ----

QueryDb::QueryDb(const fs::path& db_file) : db_file_(db_file) {
    KASCADE_CHECK(fs::is_regular_file(db_file_), "no results database at \"{}\" (run a stage first, or pass --results)",
                  db_file_.string());
    const int rc = sqlite3_open_v2(db_file_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
    if (rc != SQLITE_OK) {
        const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        sqlite3_close(db_);
        db_ = nullptr;
        KASCADE_FAIL("cannot open results database \"{}\": {}", db_file_.string(), message);
    }
    sqlite3_busy_timeout(db_, ResultsDb::kBusyTimeoutMs);
    // Opening is lazy: touch the schema now so that a file that is not a database fails here, naming itself.
    run_select(db_, "SELECT count(*) FROM sqlite_master",
               fmt::format("cannot read results database \"{}\"", db_file_.string()));
    const QueryResult version = run_select(db_, "PRAGMA user_version", db_file_.string());
    const int64_t found = std::get<int64_t>(version.rows.at(0).at(0));
    KASCADE_CHECK(found <= kSchemaVersion, "{} has schema version {}, this kascade reads up to {}; upgrade kascade",
                  db_file_.string(), found, kSchemaVersion);
    if (found > 0 && found < kSchemaVersion) read_migrated_copy(static_cast<int>(found));
}

void QueryDb::read_migrated_copy(int version) {
    // A database of an older kascade: queries read a copy in memory migrated forward, so runs_flat and every table
    // have the documented columns, and the file stays as it is.
    sqlite3* copy = nullptr;
    bool ok = sqlite3_open(":memory:", &copy) == SQLITE_OK;
    if (ok) {
        sqlite3_backup* backup = sqlite3_backup_init(copy, "main", db_, "main");
        ok = backup != nullptr && sqlite3_backup_step(backup, -1) == SQLITE_DONE;
        sqlite3_backup_finish(backup);
    }
    for (const Migration& m : schema_migrations()) {
        if (!ok || m.version <= version) continue;
        const std::string sql = fmt::format("{}\nPRAGMA user_version = {};", m.sql, m.version);
        ok = sqlite3_exec(copy, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK;
    }
    if (ok) ok = sqlite3_exec(copy, flat_views_sql(), nullptr, nullptr, nullptr) == SQLITE_OK;
    if (!ok) {
        const std::string message = copy != nullptr ? sqlite3_errmsg(copy) : "out of memory";
        sqlite3_close(copy);
        KASCADE_FAIL("cannot read results database \"{}\" (schema version {}): {}", db_file_.string(), version,
                     message);
    }
    sqlite3_close(db_);
    db_ = copy;
}

QueryDb::~QueryDb() {
    sqlite3_close(db_);
}

QueryResult QueryDb::select(std::string_view sql, std::string_view error_prefix) {
    if (!error_prefix.empty()) return run_select(db_, sql, error_prefix);
    return run_select(db_, sql, fmt::format("query \"{}\"", trim(sql)));
}

std::vector<std::string> QueryDb::columns_of(std::string_view table) {
    return run_select(db_, fmt::format("SELECT * FROM \"{}\" LIMIT 0", table),
                      fmt::format("{}: cannot read the columns of {}", db_file_.string(), table))
        .columns;
}

// ---- Formats ----

OutputFormat parse_output_format(std::string_view name) {
    if (name == "table") return OutputFormat::Table;
    if (name == "csv") return OutputFormat::Csv;
    if (name == "json") return OutputFormat::Json;
    if (name == "markdown" || name == "md") return OutputFormat::Markdown;
    KASCADE_FAIL("unknown output format '{}'; formats are: table, csv, json, markdown", name);
}

std::string format_result(const QueryResult& result, OutputFormat format) {
    switch (format) {
        case OutputFormat::Table:
            return format_table(result);
        case OutputFormat::Csv:
            return format_csv(result);
        case OutputFormat::Json:
            return format_json(result);
        case OutputFormat::Markdown:
            return format_markdown(result);
    }
    KASCADE_ASSERT(false);
}

void write_result(std::FILE* out, const QueryResult& result, OutputFormat format) {
    const std::string text = format_result(result, format);
    // fwrite, not fputs: the text's length, never its first NUL, decides what is written.
    const std::size_t written = std::fwrite(text.data(), 1, text.size(), out);
    KASCADE_CHECK(written == text.size() && std::fflush(out) == 0, "cannot write the output ({} of {} bytes): {}",
                  written, text.size(), std::strerror(errno));
}

// ---- kascade query runs ----

const std::vector<std::string>& default_runs_columns() {
    static const std::vector<std::string> columns = {
        "id",   "method", "phase",     "policy",     "threshold",       "n_anchors", "topk_tiles",   "topk_pct",
        "tile", "ctx",    "ppl_dense", "ppl_sparse", "degradation_pct", "density",   "tokens_per_s",
    };
    return columns;
}

std::string runs_query_sql(const RunsQuery& query, const std::vector<std::string>& available) {
    const std::vector<std::string>& columns = query.columns.empty() ? default_runs_columns() : query.columns;
    for (const std::string& c : columns) check_column(c, "--columns", available);

    std::vector<std::string> order;
    std::string_view spec = query.order_by;
    while (!spec.empty()) {
        const std::size_t comma = spec.find(',');
        const std::string item = trim(spec.substr(0, comma));
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        KASCADE_CHECK(!item.empty(), "empty column in --order-by \"{}\"", query.order_by);
        const std::size_t space = item.find_first_of(" \t");
        const std::string column = item.substr(0, space);
        const std::string direction = space == std::string::npos ? "" : lower(trim(item.substr(space)));
        check_column(column, "--order-by", available);
        KASCADE_CHECK(direction.empty() || direction == "asc" || direction == "desc",
                      "--order-by \"{}\": expected 'asc' or 'desc' after '{}', found '{}'", query.order_by, column,
                      direction);
        order.push_back(direction.empty() ? column : column + " " + (direction == "desc" ? "DESC" : "ASC"));
    }
    if (order.empty()) order.emplace_back("id");

    std::string sql = fmt::format("SELECT {} FROM runs_flat", fmt::join(columns, ", "));
    if (!trim(query.where).empty()) sql += fmt::format(" WHERE ({})", query.where);
    sql += fmt::format(" ORDER BY {}", fmt::join(order, ", "));
    KASCADE_CHECK(query.limit >= 0, "invalid --limit {} (must be >= 0)", query.limit);
    if (query.limit > 0) sql += fmt::format(" LIMIT {}", query.limit);
    return sql;
}

QueryResult query_runs(QueryDb& db, const RunsQuery& query) {
    const std::string sql = runs_query_sql(query, db.columns_of("runs_flat"));
    if (trim(query.where).empty()) return db.select(sql);
    // Check the expression alone first: inside "WHERE (...) ORDER BY" SQLite would blame tokens the user never
    // typed ("near ")": syntax error" instead of "incomplete input").
    const std::string error_prefix = fmt::format("invalid --where \"{}\"", query.where);
    db.select(fmt::format("SELECT count(*) FROM runs_flat WHERE {}", query.where), error_prefix);
    return db.select(sql, error_prefix);
}

QueryResult query_task_scores(QueryDb& db, const std::string& where, bool by_depth) {
    const std::string group = by_depth ? "task_run_id, length, depth_pct" : "task_run_id, length";
    return db.select(
        "SELECT task_run_id, task, method, prefill, policy, n_anchors, tile, topk_tiles, topk_pct, page_size, length" +
            std::string(by_depth ? ", depth_pct" : "") +
            ", count(*) AS samples, round(avg(score), 4) AS score, round(avg(density), 4) AS density, "
            "round(avg(prefill_tokens_per_s), 1) AS prefill_tokens_per_s FROM task_samples_flat" +
            (where.empty() ? std::string() : " WHERE " + where) + " GROUP BY " + group + " ORDER BY " + group,
        "--where");
}

QueryResult query_dataset_scores(QueryDb& db, const std::string& where) {
    return db.select(
        "SELECT task_run_id, dataset_name, metric, method, prefill, policy, n_anchors, tile, topk_tiles, topk_pct, "
        "page_size, max_length, chat_template, count(*) AS samples, round(avg(score), 4) AS score, "
        "round(avg(density), 4) AS density, sum(cut_at IS NOT NULL) AS cut, "
        "round(avg(prefill_tokens_per_s), 1) AS prefill_tokens_per_s FROM dataset_samples_flat" +
            (where.empty() ? std::string() : " WHERE " + where) + " GROUP BY task_run_id ORDER BY task_run_id",
        "--where");
}

}  // namespace kascade
