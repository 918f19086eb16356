// tests/cli/test_query_output.cpp: `kascade query` carries every row in every format, whatever bytes the values
// hold (issue 25, class 6). Table and markdown escape what a terminal would act on (NUL, ESC, C1 controls, bytes
// that are not UTF-8) instead of stopping at a NUL and dropping the rows after it; JSON escapes; CSV is RFC 4180
// (checked with a strict parser written here) and refuses the one byte it cannot carry, NUL, naming where it is.
// A real results database, real kascade processes.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/store/results_db.h"
#include "run_command.h"

namespace fs = std::filesystem;

namespace {

/// The values stored: one of each kind of byte a value can hold, and rows after each.
const std::vector<std::string> kPaths = {
    "plain",
    std::string("nul \0 after the nul", 19),
    "esc \x1b[31mred\x1b[0m",
    "quote \" comma , line\nbreak\r\ttab \\ backslash",
    "c1 \xc2\x9b csi, bidi \xe2\x80\xae override",
    "not utf-8 \xff\xfe",
    "last row",
};

/// Strict RFC 4180: records end in CRLF; a field is either free of , " CR LF or quoted with "" for a quote.
/// nullopt if `csv` breaks a rule.
std::optional<std::vector<std::vector<std::string>>> parse_rfc4180(const std::string& csv) {
    std::vector<std::vector<std::string>> records;
    std::size_t i = 0;
    while (i < csv.size()) {
        std::vector<std::string>& record = records.emplace_back();
        while (true) {
            std::string field;
            if (i < csv.size() && csv[i] == '"') {
                for (++i;; ++i) {
                    if (i >= csv.size()) return std::nullopt;  // unterminated quote
                    if (csv[i] == '"') {
                        if (i + 1 < csv.size() && csv[i + 1] == '"') {
                            field += '"';
                            ++i;
                            continue;
                        }
                        ++i;
                        break;
                    }
                    field += csv[i];
                }
            } else {
                while (i < csv.size() && csv[i] != ',' && csv[i] != '\r' && csv[i] != '\n') {
                    if (csv[i] == '"') return std::nullopt;  // a quote in an unquoted field
                    field += csv[i++];
                }
            }
            record.push_back(field);
            if (i < csv.size() && csv[i] == ',') {
                ++i;
                continue;
            }
            if (csv.compare(i, 2, "\r\n") != 0) return std::nullopt;  // every record ends in CRLF
            i += 2;
            break;
        }
    }
    return records;
}

/// Whether `text` holds a byte a terminal acts on: a control byte other than LF, DEL, a C1 control (as the byte or
/// as UTF-8), or a bidirectional override.
bool has_terminal_control(const std::string& text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if ((c < 0x20 && c != '\n') || c == 0x7F || c == 0xFF || c == 0xFE) return true;
        if (c == 0xC2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xE0) == 0x80) return true;
        if (text.compare(i, 3, "\xe2\x80\xae") == 0) return true;
    }
    return false;
}

class QueryOutput : public ::testing::Test {
  protected:
    void SetUp() override {
        kascade::ResultsDb db(results_);
        for (std::size_t i = 0; i < kPaths.size(); ++i)
            db.upsert_text({0, fmt::format("h{}", i), kPaths[i], static_cast<std::int64_t>(i), ""});
    }
    CommandResult query(const std::string& sql, const std::string& format) const {
        return run_kascade("query sql " + shell_quote(sql) + " --format " + format + " --results " +
                           shell_quote(results_));
    }

    TempDir dir_{"query_output"};
    fs::path results_ = dir_ / "results";
};

TEST_F(QueryOutput, EveryFormatCarriesEveryRowOrRefuses) {
    const std::string all = "SELECT id, path FROM texts ORDER BY id";

    // Table and markdown: every row, each byte shown, nothing a terminal would act on.
    for (const char* format : {"table", "markdown"}) {
        const CommandResult r = query(all, format);
        ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2 + static_cast<long>(kPaths.size())) << r.out;
        EXPECT_FALSE(has_terminal_control(r.out)) << format << ":\n" << r.out;
        for (const char* shown : {"nul \\x00 after the nul", "esc \\x1b[31mred\\x1b[0m",
                                  "quote \" comma , line\\nbreak\\r\\ttab \\\\ backslash", "c1 \\u009b csi",
                                  "bidi \\u202e override", "not utf-8 \\xff\\xfe", "last row"}) {
            EXPECT_NE(r.out.find(shown), std::string::npos) << format << ": no " << shown << " in\n" << r.out;
        }
    }

    // JSON: every row, every value as stored (invalid UTF-8 replaced by U+FFFD, as JSON requires).
    const CommandResult json = query(all, "json");
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_FALSE(has_terminal_control(json.out)) << json.out;
    const nlohmann::json rows = nlohmann::json::parse(json.out);
    ASSERT_EQ(rows.size(), kPaths.size()) << json.out;
    for (std::size_t i = 0; i < kPaths.size(); ++i) {
        if (kPaths[i].rfind("not utf-8", 0) == 0) continue;
        EXPECT_EQ(rows[i]["path"].get<std::string>(), kPaths[i]) << i;
    }

    // CSV cannot carry a NUL: refused, naming the row and column, and nothing printed.
    const CommandResult with_nul = query(all, "csv");
    EXPECT_EQ(with_nul.exit_code, 1);
    EXPECT_EQ(with_nul.out, "");
    EXPECT_EQ(with_nul.err,
              "kascade: error: row 2, column path holds a NUL byte, which CSV cannot carry; use --format json (it "
              "escapes it as \\u0000)\n");

    // Every other byte: RFC 4180, and the values read back byte for byte.
    const CommandResult csv = query("SELECT id, path FROM texts WHERE id <> 2 ORDER BY id", "csv");
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    const auto records = parse_rfc4180(csv.out);
    ASSERT_TRUE(records.has_value()) << "not RFC 4180:\n" << csv.out;
    ASSERT_EQ(records->size(), kPaths.size()) << csv.out;  // header + every row but the NUL one
    EXPECT_EQ((*records)[0], (std::vector<std::string>{"id", "path"}));
    std::size_t record = 1;
    for (std::size_t i = 0; i < kPaths.size(); ++i) {
        if (i == 1) continue;
        EXPECT_EQ((*records)[record], (std::vector<std::string>{std::to_string(i + 1), kPaths[i]})) << i;
        ++record;
    }
}

}  // namespace
