// pipeline/report/report_rows.h: report-internal access to the rows of a read-only query (io/store/table_format.h)
// by column name, with SQLite's NULL, INTEGER, REAL and TEXT cells turned into the optional values the report
// structs hold. Shared by the loaders of runs (report_data.cpp) and task runs (report_task_data.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/enum_names.h"
#include "base/error.h"
#include "io/store/table_format.h"

namespace kascade::report_rows {

inline std::optional<std::int64_t> opt_int(const QueryValue& v) {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
    if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
    return std::nullopt;
}
inline std::optional<double> opt_real(const QueryValue& v) {
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
    return std::nullopt;
}
inline std::string text(const QueryValue& v) {
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
    return {};
}
inline double real_or_nan(const QueryValue& v) {
    return opt_real(v).value_or(std::numeric_limits<double>::quiet_NaN());
}

/// The name of a mode that may not apply ("" when it does not).
template <typename E>
std::string name_or_empty(const std::optional<E>& mode) {
    return mode ? std::string(mode_name(*mode)) : std::string();
}

/// Row access by column name, so the SELECT lists of the loaders can be read as they are written.
class Row {
  public:
    Row(const QueryResult& result, size_t row) : result_(result), row_(row) {}
    const QueryValue& operator[](std::string_view column) const {
        for (size_t c = 0; c < result_.columns.size(); ++c) {
            if (result_.columns[c] == column) return result_.rows[row_][c];
        }
        KASCADE_ASSERT(false && "column not selected");
        return result_.rows[row_][0];
    }

    /// A mode column (base/modes.h) read through its one name table: a value the table does not know is an error
    /// naming the column, with the closest name. NULL and '' (a mode that does not apply) give nullopt.
    template <typename E>
    std::optional<E> opt_mode(std::string_view column) const {
        const std::string value = text((*this)[column]);
        if (value.empty()) return std::nullopt;
        return parse_mode<E>(value, fmt::format("column {}", column));
    }
    /// A mode column that is never NULL.
    template <typename E>
    E mode(std::string_view column) const {
        return parse_mode<E>(text((*this)[column]), fmt::format("column {}", column));
    }

  private:
    const QueryResult& result_;
    size_t row_;
};

/// A SQL string literal.
inline std::string sql_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
    return out + "'";
}

/// "1,2,3" for an IN (...) list.
template <class T>
std::string id_list(const T& ids) {
    return fmt::format("{}", fmt::join(ids, ","));
}

}  // namespace kascade::report_rows
