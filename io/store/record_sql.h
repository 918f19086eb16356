// io/store/record_sql.h: internal to io/store: binding records.h structs to SQL statements through their field
// lists, and turning SQLite's exceptions into kascade::Error. Shared by the results store and its merge.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "base/error.h"
#include "io/store/records.h"
#include "io/store/results_db.h"

namespace kascade::store_sql {

template <class R>
constexpr bool kHasId = requires(R r) {
    r.id;
};

// ---- Binding and reading records through their field lists ----

inline void bind_value(SQLite::Statement& st, int index, std::int64_t v) {
    st.bind(index, v);
}
inline void bind_value(SQLite::Statement& st, int index, double v) {
    st.bind(index, v);
}
inline void bind_value(SQLite::Statement& st, int index, const std::string& v) {
    st.bind(index, v);
}
template <class T>
inline void bind_value(SQLite::Statement& st, int index, const std::optional<T>& v) {
    if (v) {
        bind_value(st, index, *v);
    } else {
        st.bind(index);
    }
}

inline void read_value(const SQLite::Column& c, std::int64_t& v) {
    v = c.getInt64();
}
inline void read_value(const SQLite::Column& c, double& v) {
    v = c.getDouble();
}
inline void read_value(const SQLite::Column& c, std::string& v) {
    v = c.getString();
}
template <class T>
inline void read_value(const SQLite::Column& c, std::optional<T>& v) {
    if (c.isNull()) {
        v.reset();
    } else {
        read_value(c, v.emplace());
    }
}

template <class R>
inline std::string column_list() {
    std::string cols;
    for (const auto& f : R::fields()) {
        if (!cols.empty()) cols += ", ";
        cols += f.name;
    }
    return cols;
}

// "INSERT INTO t (a, b) VALUES (?, ?)" followed by `suffix` (e.g. an ON CONFLICT clause).
template <class R>
inline std::string insert_sql(std::string_view suffix = {}) {
    std::string marks;
    for (std::size_t i = 0; i < R::fields().size(); ++i) marks += i == 0 ? "?" : ", ?";
    return fmt::format("INSERT INTO {} ({}) VALUES ({}){}", R::table, column_list<R>(), marks, suffix);
}

// " ON CONFLICT(<key>) DO UPDATE SET a = excluded.a, ...": a re-insert of the same key replaces the values in place
// (unlike INSERT OR REPLACE, which deletes the row first and so would trip foreign keys that point at it).
template <class R>
inline std::string upsert_suffix(std::string_view key) {
    std::string set;
    for (const auto& f : R::fields()) {
        if (f.name == key) continue;
        if (!set.empty()) set += ", ";
        set += fmt::format("{0} = excluded.{0}", f.name);
    }
    return fmt::format(" ON CONFLICT({}) DO UPDATE SET {}", key, set);
}

template <class R>
inline void bind_record(SQLite::Statement& st, const R& record) {
    int index = 1;
    for (const auto& f : R::fields()) {
        std::visit([&](auto member) { bind_value(st, index, record.*member); }, f.member);
        ++index;
    }
}

template <class R>
inline void insert_record(SQLite::Database& db, const R& record, std::string_view suffix = {}) {
    SQLite::Statement st(db, insert_sql<R>(suffix));
    bind_record(st, record);
    st.exec();
}

// Reads rows of R: "SELECT [id,] <fields> FROM <table> <tail>" with `args` bound to the tail's placeholders.
template <class R, class... Args>
std::vector<R> select_records(SQLite::Database& db, std::string_view tail, const Args&... args) {
    std::string sql = fmt::format("SELECT {}{} FROM {} {}", kHasId<R> ? "id, " : "", column_list<R>(), R::table, tail);
    SQLite::Statement st(db, sql);
    int index = 1;
    (bind_value(st, index++, args), ...);
    std::vector<R> out;
    while (st.executeStep()) {
        R record;
        int col = 0;
        if constexpr (kHasId<R>) record.id = st.getColumn(col++).getInt64();
        for (const auto& f : R::fields()) {
            std::visit([&](auto member) { read_value(st.getColumn(col), record.*member); }, f.member);
            ++col;
        }
        out.push_back(std::move(record));
    }
    return out;
}

template <class R, class... Args>
std::optional<R> select_one(SQLite::Database& db, std::string_view tail, const Args&... args) {
    std::vector<R> rows = select_records<R>(db, tail, args...);
    if (rows.empty()) return std::nullopt;
    return std::move(rows.front());
}

template <class R>
R with_created_at(R record) {
    if (record.created_at.empty()) record.created_at = utc_now();
    return record;
}

// Runs `body`, turning SQLite's exceptions into kascade::Error naming the database and what was being done.
template <class F>
auto guarded(const std::filesystem::path& db_file, std::string_view what, F&& body) {
    try {
        return body();
    } catch (const SQLite::Exception& e) {
        KASCADE_FAIL("{}: {}: {}", db_file.string(), what, e.what());
    }
}

inline std::int64_t id_by_hash(SQLite::Database& db, std::string_view table, const std::string& hash) {
    SQLite::Statement st(db, fmt::format("SELECT id FROM {} WHERE hash = ?", table));
    st.bind(1, hash);
    KASCADE_ASSERT(st.executeStep());
    return st.getColumn(0).getInt64();
}

}  // namespace kascade::store_sql
