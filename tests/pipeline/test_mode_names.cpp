// tests/pipeline/test_mode_names.cpp: one vocabulary of modes (base/modes.h, base/enum_names.h). Every name of every
// mode round-trips; a misspelt name gets the same "did you mean" from the CLI, a sweep file and a value read back
// from the results database; the database's CHECK lists (a fresh database's schema, as SQLite stores it) equal the
// name tables; and no source file compares a mode-name string outside the tables.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "base/modes.h"
#include "common/error_of.h"
#include "io/store/results_db.h"
#include "io/weights/dtype.h"
#include "pipeline/sweep/sweep_spec.h"
#include "pipeline/sweep_fixture.h"
#include "pipeline/tasks/chat_template.h"
#include "pipeline/tasks/longbench_metrics.h"
#include "pipeline/tasks/task_kind.h"

namespace {

using namespace kascade;
using test::error_of;

template <typename E>
void expect_round_trip(const char* kind) {
    SCOPED_TRACE(kind);
    const std::vector<std::string>& names = mode_names<E>();
    EXPECT_EQ(names.size(), EnumNameTable<E>::names.size());
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "a name given twice";
    std::set<E> values;
    for (const auto& [value, name] : EnumNameTable<E>::names) {
        values.insert(value);
        EXPECT_EQ(mode_name(value), name);
        EXPECT_EQ(mode_from_name<E>(name), value);
        EXPECT_EQ(parse_mode<E>(name, "test"), value);
    }
    EXPECT_EQ(values.size(), names.size()) << "a value given twice";
    EXPECT_FALSE(mode_from_name<E>("").has_value());
    EXPECT_FALSE(mode_from_name<E>(names.front() + "x").has_value());
}

}  // namespace

TEST(ModeNames, EveryNameOfEveryModeRoundTrips) {
    expect_round_trip<EvalMethod>("EvalMethod");
    expect_round_trip<EvalPhase>("EvalPhase");
    expect_round_trip<TaskPrefill>("TaskPrefill");
    expect_round_trip<KeyGranularity>("KeyGranularity");
    expect_round_trip<Pooling>("Pooling");
    expect_round_trip<KRule>("KRule");
    expect_round_trip<SchedulePolicy>("SchedulePolicy");
    expect_round_trip<HeadMapMode>("HeadMapMode");
    expect_round_trip<LayerRole>("LayerRole");
    expect_round_trip<RunLayerRole>("RunLayerRole");
    expect_round_trip<SimilarityMetric>("SimilarityMetric");
    expect_round_trip<SimilarityAggregation>("SimilarityAggregation");
    expect_round_trip<WeightsDType>("WeightsDType");
    expect_round_trip<MatmulPrecision>("MatmulPrecision");
    expect_round_trip<KvDType>("KvDType");
    expect_round_trip<DType>("DType");
    expect_round_trip<TaskKind>("TaskKind");
    expect_round_trip<TaskMetric>("TaskMetric");
    expect_round_trip<LongBenchMetric>("LongBenchMetric");
    expect_round_trip<ChatTemplate>("ChatTemplate");
    expect_round_trip<ChatRole>("ChatRole");
    // Schedule files store the layer roles as these integers.
    EXPECT_EQ(static_cast<int>(LayerRole::Dense), 0);
    EXPECT_EQ(static_cast<int>(LayerRole::Anchor), 1);
    EXPECT_EQ(static_cast<int>(LayerRole::Reuse), 2);
}

TEST(ModeNames, AMisspeltNameGetsTheSameSuggestionFromTheCliASweepFileAndTheDatabase) {
    TempDir dir{"mode_names"};
    const std::string suggestion =
        "(expected dense, kascade, oracle, streaming, quest, omnikv, lessismore); did you "
        "mean streaming?";

    // The CLI.
    const CommandResult cli = run_kascade("eval --results " + shell_quote(dir / "cli") + " --model " +
                                          shell_quote(kStoriesBin) + " --tokenizer " + shell_quote(kStoriesTok) +
                                          " --text " + shell_quote(kStoriesText) + " --method streamin --topk-tiles 2");
    EXPECT_NE(cli.exit_code, 0);
    EXPECT_NE(cli.err.find("invalid --method='streamin' " + suggestion), std::string::npos) << cli.err;

    // A sweep file.
    const fs::path sweep = dir / "typo.toml";
    std::ofstream(sweep) << "[model]\npath = \"" << kStoriesBin.string() << "\"\ntokenizer = \"" << kStoriesTok.string()
                         << "\"\n[text]\npath = \"" << kStoriesText.string()
                         << "\"\n[grid]\nctx = [128]\ntile = [16]\ntopk_tiles = [2]\n[baselines]\nmethods = "
                            "[\"dense\", \"streamin\"]\n";
    const std::string from_file = error_of([&] { load_sweep_spec(sweep); });
    EXPECT_NE(from_file.find("baselines.methods='streamin' " + suggestion), std::string::npos) << from_file;

    // The database: a value no table knows, written past the CHECK constraint (as a damaged or foreign database
    // might hold it), is refused where it is read, naming the column.
    const fs::path results = dir / "db";
    const CommandResult eval =
        run_kascade("eval --results " + shell_quote(results) + " --model " + shell_quote(kStoriesBin) +
                    " --tokenizer " + shell_quote(kStoriesTok) + " --text " + shell_quote(kStoriesText) +
                    " --method streaming --topk-tiles 2 --ctx 128 --eval-tokens 256");
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    const CommandResult damage =
        run_shell("sqlite3 " + shell_quote(results / "kascade.db") +
                      " \"PRAGMA ignore_check_constraints = 1; UPDATE runs SET method = 'streamin' WHERE method = "
                      "'streaming';\" 2>" +
                      shell_quote(dir / "err.txt"),
                  dir / "err.txt");
    ASSERT_EQ(damage.exit_code, 0) << damage.err;
    const CommandResult report =
        run_kascade("report --results " + shell_quote(results) + " --out " + shell_quote(dir / "report"));
    EXPECT_NE(report.exit_code, 0);
    EXPECT_NE(report.err.find("invalid column method='streamin' " + suggestion), std::string::npos) << report.err;
    EXPECT_FALSE(fs::exists(dir / "report"));
}

TEST(ModeNames, SchemaCheckListsEqualTheNameTables) {
    TempDir dir{"mode_schema"};
    { ResultsDb db(dir.path()); }
    // Every "column IN ('a', 'b', ...)" of a table's CREATE statement, by column.
    auto check_lists = [&](const std::string& table) {
        const std::string sql = db_value(
            dir / "kascade.db", "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = '" + table + "'");
        EXPECT_FALSE(sql.empty()) << table;
        std::map<std::string, std::vector<std::string>> lists;
        const std::regex check(R"((\w+)\s+IN\s*\(([^)]*)\))");
        for (auto m = std::sregex_iterator(sql.begin(), sql.end(), check); m != std::sregex_iterator(); ++m) {
            const std::string body = (*m)[2];
            if (body.find('\'') == std::string::npos) continue;
            std::vector<std::string> names;
            const std::regex quoted("'([^']*)'");
            for (auto q = std::sregex_iterator(body.begin(), body.end(), quoted); q != std::sregex_iterator(); ++q)
                names.push_back((*q)[1]);
            lists.emplace((*m)[1], names);  // the column definition comes first; later CHECKs use subsets
        }
        return lists;
    };
    const auto as_set = [](const std::vector<std::string>& v) { return std::set<std::string>(v.begin(), v.end()); };

    auto runs = check_lists("runs");
    EXPECT_EQ(as_set(runs.at("method")), as_set(mode_names<EvalMethod>()));
    EXPECT_EQ(as_set(runs.at("phase")), as_set(mode_names<EvalPhase>()));
    EXPECT_EQ(as_set(runs.at("key_granularity")), as_set(mode_names<KeyGranularity>()));
    EXPECT_EQ(as_set(runs.at("k_rule")), as_set(mode_names<KRule>()));
    EXPECT_EQ(as_set(runs.at("pooling")), as_set(mode_names<Pooling>()));
    EXPECT_EQ(as_set(runs.at("matmul")), as_set(mode_names<MatmulPrecision>()));
    EXPECT_EQ(as_set(runs.at("kv_dtype")), as_set(mode_names<KvDType>()));

    auto schedules = check_lists("schedules");
    EXPECT_EQ(as_set(schedules.at("policy")), as_set(mode_names<SchedulePolicy>()));
    EXPECT_EQ(as_set(schedules.at("metric")), as_set(mode_names<SimilarityMetric>()));
    EXPECT_EQ(as_set(schedules.at("aggregation")), as_set(mode_names<SimilarityAggregation>()));
    EXPECT_EQ(as_set(schedules.at("head_map")), as_set(mode_names<HeadMapMode>()));
    EXPECT_EQ(as_set(check_lists("schedule_layers").at("role")), as_set(mode_names<LayerRole>()));
    EXPECT_EQ(as_set(check_lists("run_layers").at("role")), as_set(mode_names<RunLayerRole>()));

    auto task_runs = check_lists("task_runs");
    EXPECT_EQ(as_set(task_runs.at("method")), as_set(mode_names<EvalMethod>()));
    EXPECT_EQ(as_set(task_runs.at("prefill")), as_set(mode_names<TaskPrefill>()));
    EXPECT_EQ(as_set(task_runs.at("key_granularity")), as_set(mode_names<KeyGranularity>()));
    EXPECT_EQ(as_set(task_runs.at("k_rule")), as_set(mode_names<KRule>()));
    EXPECT_EQ(as_set(task_runs.at("pooling")), as_set(mode_names<Pooling>()));
    EXPECT_EQ(as_set(task_runs.at("chat_template")), as_set(mode_names<ChatTemplate>()));
    EXPECT_EQ(as_set(task_runs.at("matmul")), as_set(mode_names<MatmulPrecision>()));
    EXPECT_EQ(as_set(task_runs.at("kv_dtype")), as_set(mode_names<KvDType>()));
    std::set<std::string> tasks = as_set(mode_names<TaskKind>());
    tasks.insert("dataset");  // a run on a dataset file (pipeline/stages/dataset_task_stage.h)
    EXPECT_EQ(as_set(task_runs.at("task")), tasks);
    std::set<std::string> metrics = as_set(mode_names<TaskMetric>());
    for (const std::string& m : mode_names<LongBenchMetric>()) metrics.insert(m);
    EXPECT_EQ(as_set(task_runs.at("metric")), metrics);
}

TEST(ModeNames, NoSourceFileComparesAModeNameString) {
    // The names of the modes the layers share: a comparison with one of them as a string literal ("== \"dense\"")
    // is a second mapping beside the table. Comments are ignored.
    std::set<std::string> names;
    for (const auto* list :
         {&mode_names<EvalMethod>(), &mode_names<EvalPhase>(), &mode_names<TaskPrefill>(),
          &mode_names<KeyGranularity>(), &mode_names<Pooling>(), &mode_names<KRule>(), &mode_names<SchedulePolicy>(),
          &mode_names<HeadMapMode>(), &mode_names<LayerRole>(), &mode_names<RunLayerRole>(),
          &mode_names<SimilarityMetric>(), &mode_names<SimilarityAggregation>(), &mode_names<WeightsDType>(),
          &mode_names<MatmulPrecision>(), &mode_names<KvDType>(), &mode_names<DType>()})
        names.insert(list->begin(), list->end());
    std::string alternatives;
    for (const std::string& n : names) {
        if (!alternatives.empty()) alternatives += '|';
        alternatives += std::regex_replace(n, std::regex(R"(\.)"), R"(\.)");
    }
    const std::regex comparison("[!=]=\\s*\"(" + alternatives + ")\"|\"(" + alternatives + ")\"\\s*[!=]=");

    const fs::path source = KASCADE_SOURCE_DIR;
    std::vector<std::string> found;
    int files = 0;
    for (const char* folder : {"base", "io", "kernels", "pipeline", "bench"}) {
        for (const auto& entry : fs::recursive_directory_iterator(source / folder)) {
            const std::string ext = entry.path().extension().string();
            if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
            ++files;
            std::ifstream in(entry.path());
            int line_number = 0;
            for (std::string line; std::getline(in, line);) {
                ++line_number;
                const std::size_t comment = line.find("//");
                if (comment != std::string::npos) line.resize(comment);
                if (std::regex_search(line, comparison))
                    found.push_back(fs::relative(entry.path(), source).string() + ":" + std::to_string(line_number) +
                                    ": " + line);
            }
        }
    }
    EXPECT_GT(files, 100);
    EXPECT_TRUE(found.empty()) << "compare the mode, not its name (base/modes.h):\n"
                               << fmt::format("{}", fmt::join(found, "\n"));
}
