// tests/store/merge_test.cpp: merging results folders by content key: union, idempotence, renumbered ids,
// artifact files, key-filtered imports, and refusal of newer schemas.
#include <fstream>
#include <map>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include "io/file_util.h"
#include "io/store/results_merge.h"
#include "io/store/schema.h"
#include "store/store_test_util.h"

namespace kascade {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The artifact files sample_store's rows point at, with recognisable contents; the rows get their size and
/// checksum, as a stage records them (a merge verifies every file it takes against its row).
void write_sample_files(ResultsDb& db) {
    const fs::path dir = db.results_dir();
    fs::create_directories(dir / "artifacts/capture");
    fs::create_directories(dir / "artifacts/similarity");
    std::ofstream(dir / "artifacts/capture/cap-1.h5") << "capture bytes";
    std::ofstream(dir / "artifacts/similarity/sim-1.h5") << "similarity bytes";
    for (const ArtifactRecord& a : db.list_artifacts()) {
        SQLite::Statement st(db.database(), "UPDATE artifacts SET bytes = ?, checksum = ? WHERE key = ?");
        st.bind(1, static_cast<std::int64_t>(fs::file_size(dir / a.path)));
        st.bind(2, hash_file_hex(dir / a.path));
        st.bind(3, a.key);
        st.exec();
    }
}

/// Every row of every results table, ids replaced by the keys they stand for, as one comparable value.
std::map<std::string, std::vector<std::string>> content(ResultsDb& db) {
    std::map<std::string, std::vector<std::string>> out;
    const std::map<std::string, std::string> queries = {
        {"models", "SELECT hash, path FROM models"},
        {"artifacts", "SELECT a.key, a.stage, a.path, m.hash FROM artifacts a JOIN models m ON m.id = a.model_id"},
        {"captures", "SELECT artifact_key, tile, t.hash FROM captures c JOIN texts t ON t.id = c.text_id"},
        {"similarities", "SELECT artifact_key, capture_key FROM similarities"},
        {"schedules", "SELECT key, similarity_key, policy FROM schedules"},
        {"schedule_layers",
         "SELECT s.key, l.layer, l.role FROM schedule_layers l JOIN schedules s ON s.id = "
         "l.schedule_id"},
        {"runs",
         "SELECT r.key, r.machine, s.key, m.ppl_sparse FROM runs r JOIN run_metrics m ON m.run_id = r.id "
         "LEFT JOIN schedules s ON s.id = r.schedule_id"},
        {"run_layers", "SELECT r.key, l.layer, l.density FROM run_layers l JOIN runs r ON r.id = l.run_id"},
        {"kernel_bench", "SELECT name, time_ms FROM kernel_bench"},
        {"sweeps", "SELECT key FROM sweeps"},
    };
    for (const auto& [name, sql] : queries) {
        SQLite::Statement st(db.database(), sql);
        while (st.executeStep()) {
            std::string row;
            for (int c = 0; c < st.getColumnCount(); ++c) row += st.getColumn(c).getString() + "|";
            out[name].push_back(row);
        }
        std::sort(out[name].begin(), out[name].end());
    }
    return out;
}

class MergeTest : public ::testing::Test {
  protected:
    // Shard a: the sample store. Shard b: the same capture, similarity and run, plus a second run and a
    // benchmark row, made on another machine.
    void SetUp() override {
        ResultsDb a(dir_ / "a");
        test::fill_sample_store(a);
        a.record_sweep(SweepRecord{"sweep-a", "a.toml", 1, ""},
                       {SweepJobRecord{"sweep-a", 0, "eval", "run-1", "x", "[]", std::nullopt}});
        write_sample_files(a);
        ResultsDb b(dir_ / "b");
        const test::SampleIds ids = test::fill_sample_store(b);
        RunRecord other = test::sample_run(ids.model, ids.text, std::nullopt);
        other.key = "run-2";
        other.method = "oracle";
        other.machine = "node-17";
        b.insert_run(other, test::sample_metrics(), test::sample_run_layers());
        b.insert_kernel_bench({0, "dense_prefill", "{}", 2, 1.5, 40.0, std::nullopt, 1.0, "abc", "node-17", "t0"});
        write_sample_files(b);
    }
    TempDir dir_{"merge"};
};

TEST_F(MergeTest, TwoShardsGiveTheUnionAndMergingAgainChangesNothing) {
    ResultsDb into(dir_ / "into");
    ResultsDb a(dir_ / "a", DbAccess::ReadOnly), b(dir_ / "b", DbAccess::ReadOnly);
    const MergeCounts first_a = merge_results(a, into);
    EXPECT_EQ(first_a.runs, 1);
    EXPECT_EQ(first_a.artifacts, 2);
    EXPECT_EQ(first_a.files, 2);
    EXPECT_EQ(first_a.schedules, 1);
    EXPECT_EQ(first_a.sweeps, 1);
    const MergeCounts first_b = merge_results(b, into);
    EXPECT_EQ(first_b.runs, 1);  // run-2; run-1 is there already
    EXPECT_EQ(first_b.artifacts, 0);
    EXPECT_EQ(first_b.files, 0);
    EXPECT_EQ(first_b.kernel_bench, 1);
    EXPECT_EQ(first_b.skipped, 4);  // two artifacts, a schedule, a run

    const auto merged = content(into);
    EXPECT_EQ(merged.at("runs").size(), 2u);
    EXPECT_EQ(merged.at("run_layers").size(), 6u);
    EXPECT_EQ(merged.at("schedule_layers").size(), 3u);
    EXPECT_EQ(merged.at("models").size(), 1u);
    EXPECT_EQ(read_all(dir_ / "into/artifacts/capture/cap-1.h5"), "capture bytes");
    // The union, row for row: what a store written by one process with both sets of results holds.
    ResultsDb serial(dir_ / "serial");
    const test::SampleIds ids = test::fill_sample_store(serial);
    RunRecord other = test::sample_run(ids.model, ids.text, std::nullopt);
    other.key = "run-2";
    other.method = "oracle";
    other.machine = "node-17";
    serial.insert_run(other, test::sample_metrics(), test::sample_run_layers());
    serial.insert_kernel_bench({0, "dense_prefill", "{}", 2, 1.5, 40.0, std::nullopt, 1.0, "abc", "node-17", "t0"});
    serial.record_sweep(SweepRecord{"sweep-a", "a.toml", 1, ""},
                        {SweepJobRecord{"sweep-a", 0, "eval", "run-1", "x", "[]", std::nullopt}});
    EXPECT_EQ(merged, content(serial));

    for (ResultsDb* shard : {&a, &b}) {
        const MergeCounts again = merge_results(*shard, into);
        EXPECT_EQ(again.runs + again.artifacts + again.schedules + again.files + again.kernel_bench + again.sweeps, 0);
    }
    EXPECT_EQ(content(into), merged);
    EXPECT_EQ(into.database().execAndGet("PRAGMA integrity_check").getString(), "ok");
    SQLite::Statement fk(into.database(), "PRAGMA foreign_key_check");
    EXPECT_FALSE(fk.executeStep());
}

TEST_F(MergeTest, AKeyFilterImportsARunWithEverythingItDerivesFrom) {
    ResultsDb into(dir_ / "into");
    ResultsDb b(dir_ / "b", DbAccess::ReadOnly);
    const std::set<std::string> keys = {"run-1"};
    const MergeCounts counts = merge_results(b, into, &keys);
    EXPECT_EQ(counts.runs, 1);
    EXPECT_EQ(counts.schedules, 1);
    EXPECT_EQ(counts.artifacts, 2);  // the schedule's similarity and its capture
    EXPECT_EQ(counts.kernel_bench, 0);
    EXPECT_TRUE(into.find_run("run-1").has_value());
    EXPECT_FALSE(into.find_run("run-2").has_value());
    EXPECT_EQ(into.find_schedule("sched-1")->layers.size(), 3u);
    EXPECT_TRUE(fs::exists(dir_ / "into/artifacts/similarity/sim-1.h5"));
}

TEST_F(MergeTest, AShardWithANewerSchemaIsRefused) {
    {
        SQLite::Database raw(dir_ / "b" / "kascade.db", SQLite::OPEN_READWRITE);
        raw.exec("PRAGMA user_version = 99");
    }
    EXPECT_EQ(test::error_of([&] { ResultsDb b(dir_ / "b", DbAccess::ReadOnly); }),
              fmt::format("{} has schema version 99, this kascade reads up to {}; upgrade kascade",
                          (dir_ / "b" / "kascade.db").string(), kSchemaVersion));
}

}  // namespace
}  // namespace kascade
