// tests/store/table_format_test.cpp: read-only queries and the table/csv/json/markdown output of `kascade query`.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "io/store/table_format.h"
#include "store/store_test_util.h"

namespace kascade {
namespace {

using test::error_of;
using test::TempDir;

// A database with one small table exercising every cell kind: text needing quotes, UTF-8, NULL, REAL, negatives.
class QueryFormat : public ::testing::Test {
  protected:
    void SetUp() override {
        SQLite::Database raw(db_file(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        raw.exec(
            "CREATE TABLE t (name TEXT, n INTEGER, x REAL, note TEXT);"
            "INSERT INTO t VALUES ('alpha', 1, 0.5, NULL);"
            "INSERT INTO t VALUES ('b, \"quoted\"', 22, 1234.56789, 'line1' || char(10) || 'line2');"
            "INSERT INTO t VALUES ('γ', -3, NULL, 'x|y');");
    }
    std::filesystem::path db_file() const { return tmp_.path() / "q.db"; }
    QueryResult small() {
        QueryDb db(db_file());
        return db.select("SELECT name, n, x, note FROM t ORDER BY rowid");
    }

    TempDir tmp_;
};

TEST_F(QueryFormat, Table) {
    EXPECT_EQ(format_result(small(), OutputFormat::Table),
              "name          n        x  note\n"
              "-----------  --  -------  ------------\n"
              "alpha         1      0.5  -\n"
              "b, \"quoted\"  22  1234.57  line1\\nline2\n"
              "γ            -3        -  x|y\n");
}

TEST_F(QueryFormat, Csv) {
    EXPECT_EQ(format_result(small(), OutputFormat::Csv),
              "name,n,x,note\r\n"
              "alpha,1,0.5,\r\n"
              "\"b, \"\"quoted\"\"\",22,1234.56789,\"line1\nline2\"\r\n"
              "γ,-3,,x|y\r\n");
}

TEST_F(QueryFormat, Json) {
    EXPECT_EQ(format_result(small(), OutputFormat::Json),
              "[\n"
              "{\"name\":\"alpha\",\"n\":1,\"x\":0.5,\"note\":null},\n"
              "{\"name\":\"b, \\\"quoted\\\"\",\"n\":22,\"x\":1234.56789,\"note\":\"line1\\nline2\"},\n"
              "{\"name\":\"γ\",\"n\":-3,\"x\":null,\"note\":\"x|y\"}\n"
              "]\n");
}

TEST_F(QueryFormat, Markdown) {
    EXPECT_EQ(format_result(small(), OutputFormat::Markdown),
              "| name        |   n |       x | note         |\n"
              "|-------------|----:|--------:|--------------|\n"
              "| alpha       |   1 |     0.5 | -            |\n"
              "| b, \"quoted\" |  22 | 1234.57 | line1\\nline2 |\n"
              "| γ           |  -3 |       - | x\\|y         |\n");
}

TEST_F(QueryFormat, EmptyResultAndRepeatedColumnNames) {
    QueryDb db(db_file());
    const QueryResult none = db.select("SELECT n, n FROM t WHERE n > 100");
    EXPECT_EQ(format_result(none, OutputFormat::Table), "n  n\n-  -\n");
    EXPECT_EQ(format_result(none, OutputFormat::Json), "[]\n");
    EXPECT_EQ(format_result(none, OutputFormat::Csv), "n,n\r\n");
    EXPECT_EQ(format_result(db.select("SELECT n, n FROM t WHERE n = 1"), OutputFormat::Json),
              "[\n{\"n\":1,\"n_2\":1}\n]\n");
}

TEST_F(QueryFormat, StatementsThatWriteAreRefused) {
    QueryDb db(db_file());
    EXPECT_EQ(error_of([&] { db.select("DELETE FROM t"); }),
              "query \"DELETE FROM t\": refusing a statement that writes; queries are read-only (SELECT, WITH, "
              "PRAGMA x)");
    EXPECT_EQ(error_of([&] { db.select("SELECT 1; DELETE FROM t"); }),
              "query \"SELECT 1; DELETE FROM t\": only one statement can be run per query");
    EXPECT_NE(error_of([&] { db.select("PRAGMA user_version = 3"); }).find("refusing"), std::string::npos);
    EXPECT_EQ(error_of([&] { db.select("SELECT nope FROM t"); }), "query \"SELECT nope FROM t\": no such column: nope");
    // Trailing semicolons and comments are fine.
    EXPECT_EQ(db.select("SELECT count(*) AS rows FROM t; -- how many\n").rows.at(0).at(0), QueryValue(std::int64_t{3}));
    SQLite::Database check(db_file());
    EXPECT_EQ(check.execAndGet("SELECT count(*) FROM t").getInt(), 3);
}

TEST(QueryDb, MissingDatabaseIsAnError) {
    TempDir tmp;
    EXPECT_EQ(error_of([&] { QueryDb db(tmp.path() / "kascade.db"); }),
              fmt::format("no results database at \"{}\" (run a stage first, or pass --results)",
                          (tmp.path() / "kascade.db").string()));
}

TEST(OutputFormat, Names) {
    EXPECT_EQ(parse_output_format("csv"), OutputFormat::Csv);
    EXPECT_EQ(parse_output_format("md"), OutputFormat::Markdown);
    EXPECT_EQ(error_of([] { parse_output_format("xml"); }),
              "unknown output format 'xml'; formats are: table, csv, json, markdown");
}

TEST(RunsQuery, BuildsTheSql) {
    const std::vector<std::string> available = {"id", "method", "density", "ppl_sparse"};
    RunsQuery q;
    q.columns = {"id", "density"};
    EXPECT_EQ(runs_query_sql(q, available), "SELECT id, density FROM runs_flat ORDER BY id");
    q.where = "density < 0.5";
    q.order_by = "density DESC, ppl_sparse";
    q.limit = 3;
    EXPECT_EQ(runs_query_sql(q, available),
              "SELECT id, density FROM runs_flat WHERE (density < 0.5) ORDER BY density DESC, ppl_sparse LIMIT 3");
    q.order_by = "densty";
    EXPECT_EQ(error_of([&] { runs_query_sql(q, available); }),
              "unknown column 'densty' in --order-by; did you mean 'density'? columns are: id, method, density, "
              "ppl_sparse");
    q.order_by = "zzzzzzzz";
    EXPECT_EQ(error_of([&] { runs_query_sql(q, available); }),
              "unknown column 'zzzzzzzz' in --order-by; columns are: id, method, density, ppl_sparse");
    q.order_by = "density sideways";
    EXPECT_EQ(error_of([&] { runs_query_sql(q, available); }),
              "--order-by \"density sideways\": expected 'asc' or 'desc' after 'density', found 'sideways'");
}

TEST(RunsQuery, RunsOnTheResultsStore) {
    TempDir tmp;
    {
        ResultsDb store(tmp.path());
        test::fill_sample_store(store);
    }
    QueryDb db(tmp.path() / "kascade.db");
    RunsQuery q;
    q.where = "method = 'kascade' AND degradation_pct < 2";
    q.order_by = "density desc";
    const QueryResult r = query_runs(db, q);
    EXPECT_EQ(r.columns, default_runs_columns());
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0][1], QueryValue(std::string("kascade")));
    EXPECT_EQ(r.rows[0][2], QueryValue(std::string("prefill")));
    EXPECT_EQ(r.rows[0][3], QueryValue(std::string("threshold")));
    EXPECT_EQ(r.rows[0][5], QueryValue(std::monostate{}));  // n_anchors: NULL for the threshold policy

    q.where = "degradation_pct <";
    EXPECT_EQ(error_of([&] { query_runs(db, q); }), "invalid --where \"degradation_pct <\": incomplete input");
    q.where = "no_such_thing > 1";
    EXPECT_EQ(error_of([&] { query_runs(db, q); }),
              "invalid --where \"no_such_thing > 1\": no such column: no_such_thing");
    q.where.clear();
    q.order_by = "densty";
    const std::string message = error_of([&] { query_runs(db, q); });
    EXPECT_EQ(message.rfind("unknown column 'densty' in --order-by; did you mean 'density'? columns are: id, method, "
                            "phase, policy, threshold,",
                            0),
              0u)
        << message;
}

}  // namespace
}  // namespace kascade
