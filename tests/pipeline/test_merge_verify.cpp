// tests/pipeline/test_merge_verify.cpp: `kascade merge` takes no artifact file on trust. A shard's file that is
// missing or damaged, or a foreign file already where a file would go, refuses the whole merge, naming each file,
// with exit 1 and nothing written (not even the destination's database); a row always arrives with its verified
// file; rows stored without a checksum (older kascade) get one on merge or on `status --verify`. Real captures and
// similarities of stories260K, real SQLite files, real kascade processes.
#include <gtest/gtest.h>

#include <sstream>

#include "common/json_output.h"
#include "io/file_util.h"
#include "sweep_fixture.h"

namespace {

using kascade::hash_file_hex;

/// Runs one statement on a database (read-write), as a user editing it with sqlite3 would; "" or the error.
std::string sql_exec_error(const fs::path& db_file, const std::string& sql) {
    sqlite3* db = nullptr;
    std::string error;
    if (sqlite3_open_v2(db_file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
        error = sqlite3_errmsg(db);
    } else {
        char* message = nullptr;
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) error = message;
        sqlite3_free(message);
    }
    sqlite3_close(db);
    return error;
}

std::string read_all_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The lines of a command's stderr.
std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

class MergeVerify : public ::testing::Test {
  protected:
    // One shard with a capture and a similarity made by kascade (two real HDF5 artifacts with checksums).
    void SetUp() override {
        const std::string results = " --results " + shell_quote(shard_);
        const CommandResult c = run_kascade("capture" + results + " --model " + shell_quote(kStoriesBin) + " --text " +
                                            shell_quote(kStoriesText) + " --calib-tokens 254 --ctx 128 --json");
        ASSERT_EQ(c.exit_code, 0) << c.err;
        capture_ = json_string(c, "capture_key");
        const CommandResult s = run_kascade("similarity" + results + " --capture " + capture_ +
                                            " --topk-tiles 2 --key-granularity tile --json");
        ASSERT_EQ(s.exit_code, 0) << s.err;
        similarity_ = json_string(s, "similarity_key");
        ASSERT_TRUE(fs::exists(file(shard_, "capture", capture_)));
        ASSERT_TRUE(fs::exists(file(shard_, "similarity", similarity_)));
    }

    /// A copy of the shard (its database is complete: the processes that wrote it have ended).
    fs::path copy_of_shard(const std::string& name) const {
        const fs::path copy = dir_ / name;
        fs::copy(shard_, copy, fs::copy_options::recursive);
        return copy;
    }
    static fs::path file(const fs::path& results, const std::string& stage, const std::string& key) {
        return results / "artifacts" / stage / (key + ".h5");
    }
    static CommandResult merge(const std::vector<fs::path>& shards, const fs::path& into) {
        std::string args = "merge";
        for (const fs::path& shard : shards) args.append(" ").append(shell_quote(shard));
        return run_kascade(args.append(" --into ").append(shell_quote(into)));
    }
    /// A refused merge: exit 1, one "kascade: error: <file>: <why>" line per named file, then the summary line.
    static void expect_refused(const CommandResult& r, const std::vector<std::pair<fs::path, std::string>>& files,
                               const fs::path& into) {
        EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
        const std::vector<std::string> lines = lines_of(r.err);
        ASSERT_EQ(lines.size(), files.size() + 1) << r.err;
        for (size_t i = 0; i < files.size(); ++i) {
            EXPECT_EQ(lines[i].rfind("kascade: error: " + files[i].first.string() + ": " + files[i].second, 0), 0u)
                << lines[i];
        }
        EXPECT_EQ(lines.back().rfind("kascade: error: nothing merged into " + into.string() + ": ", 0), 0u)
            << lines.back();
        EXPECT_FALSE(fs::exists(into / "kascade.db")) << "a refused merge created the destination database";
    }

    TempDir dir_{"merge_verify"};
    fs::path shard_ = dir_ / "shard";
    std::string capture_, similarity_;
};

TEST_F(MergeVerify, EveryArtifactFileIsVerifiedAndABadOneRefusesTheWholeMerge) {
    // A file missing in the shard: refused, and not even the destination folder is made.
    const fs::path missing = copy_of_shard("missing");
    fs::remove(file(missing, "similarity", similarity_));
    const fs::path into = dir_ / "into";
    expect_refused(merge({missing}, into), {{file(missing, "similarity", similarity_), "missing in the shard"}}, into);
    EXPECT_FALSE(fs::exists(into));

    // A damaged file (one byte changed, size kept): its checksum no longer matches the shard's row.
    const fs::path damaged = copy_of_shard("damaged");
    {
        std::fstream f(file(damaged, "capture", capture_), std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(fs::file_size(file(damaged, "capture", capture_)) / 2));
        f.put('\x5a');
    }
    expect_refused(merge({damaged}, into), {{file(damaged, "capture", capture_), "damaged: its checksum is "}}, into);

    // Shards merge in order: the first one that has an artifact gives it. A bad file there refuses every shard (the
    // good shard's rows are not written either); a bad copy of what an earlier shard gives is never taken.
    expect_refused(merge({missing, shard_}, into), {{file(missing, "similarity", similarity_), "missing in the shard"}},
                   into);
    EXPECT_FALSE(fs::exists(into));

    // A foreign file already where the capture would go (a folder the user made): neither replaced nor registered.
    fs::create_directories(into / "artifacts" / "capture");
    const fs::path foreign = file(into, "capture", capture_);
    write_text(foreign, "someone else's file");
    expect_refused(merge({shard_}, into), {{foreign, "already exists and is not the shard's capture artifact"}}, into);
    EXPECT_EQ(read_all_text(foreign), "someone else's file");

    // The same file there (a copy an interrupted merge left behind) is the shard's: it is taken as it is.
    fs::copy_file(file(shard_, "capture", capture_), foreign, fs::copy_options::overwrite_existing);
    const CommandResult good = merge({shard_}, into);
    ASSERT_EQ(good.exit_code, 0) << good.err;
    EXPECT_NE(good.out.find("2 artifacts (1 files)"), std::string::npos) << good.out;
    for (const auto& row : db_rows(into / "kascade.db", "SELECT path, checksum FROM artifacts")) {
        EXPECT_EQ(hash_file_hex(into / row[0]), row[1]) << row[0];
    }
    EXPECT_EQ(merge({shard_}, into).exit_code, 0);  // again: nothing to take, nothing to check

    // Rows stored without a checksum (schema < 5): vouched for by size and root attributes, then given one.
    const fs::path old = copy_of_shard("old");
    ASSERT_EQ(sql_exec_error(old / "kascade.db", "UPDATE artifacts SET checksum = NULL"), "");
    const fs::path old_truncated = copy_of_shard("old-truncated");
    ASSERT_EQ(sql_exec_error(old_truncated / "kascade.db", "UPDATE artifacts SET checksum = NULL"), "");
    fs::resize_file(file(old_truncated, "similarity", similarity_),
                    fs::file_size(file(old_truncated, "similarity", similarity_)) - 100);
    const fs::path into_old = dir_ / "into-old";
    expect_refused(merge({old_truncated}, into_old), {{file(old_truncated, "similarity", similarity_), "damaged: "}},
                   into_old);
    const CommandResult from_old = merge({old}, into_old);
    ASSERT_EQ(from_old.exit_code, 0) << from_old.err;
    EXPECT_NE(from_old.out.find("2 artifacts stored without a checksum got one"), std::string::npos) << from_old.out;
    for (const auto& row : db_rows(into_old / "kascade.db", "SELECT path, checksum FROM artifacts")) {
        EXPECT_EQ(hash_file_hex(into_old / row[0]), row[1]) << row[0];
    }

    // `status` reports rows without a checksum and leaves them; `status --verify` records one for each good file.
    const CommandResult status = run_kascade("status --results " + shell_quote(old));
    ASSERT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find("2 artifacts were stored without a checksum"), std::string::npos) << status.out;
    EXPECT_EQ(db_value(old / "kascade.db", "SELECT count(*) FROM artifacts WHERE checksum IS NULL"), "2");
    const CommandResult verify = run_kascade("status --verify --results " + shell_quote(old));
    ASSERT_EQ(verify.exit_code, 0) << verify.err;
    EXPECT_NE(verify.out.find("recorded the checksum of 2 artifacts"), std::string::npos) << verify.out;
    for (const auto& row : db_rows(old / "kascade.db", "SELECT path, checksum FROM artifacts")) {
        EXPECT_EQ(hash_file_hex(old / row[0]), row[1]) << row[0];
    }
}

}  // namespace
