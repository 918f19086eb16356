// Task runs on dataset files (kascade task --dataset): the JSONL reader and its refusals, prompt templates against
// Python's str.format (what LongBench's pred.py calls), the middle cut against hand-derived token lists, and end to
// end on the retrieval test model, which really retrieves: a LongBench-format JSONL of pass-key questions with its
// dataset2prompt.json and dataset2maxlen.json is answered and scored 1, the cut of each prompt is stored, a run killed
// with SIGKILL resumes to the rows of an uninterrupted run, `kascade query datasets` shows the scores, and bad input
// writes nothing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "../pipeline/sweep_fixture.h"
#include "base/error.h"
#include "common/error_of.h"
#include "common/shared_files.h"
#include "io/store/results_db.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/stages/workspace.h"
#include "pipeline/tasks/chat_template.h"
#include "pipeline/tasks/dataset_file.h"
#include "pipeline/tasks/dataset_prompt.h"
#include "pipeline/tasks/longbench_metrics.h"
#include "pipeline/tasks/task_prompt.h"

namespace {

using namespace kascade;
using test::error_of;
using test::kRetrievalModel;

DatasetSample sample_of(const nlohmann::json& row) {
    DatasetSample s;
    s.row = row;
    s.line = 1;
    return s;
}

/// Python's own str.format of `template_text` over `row`: the reference for format_prompt_template.
std::string python_format(const std::string& template_text, const nlohmann::json& row, const fs::path& dir) {
    write_text(dir / "template.json", nlohmann::json{{"t", template_text}, {"row", row}}.dump());
    const CommandResult r = run_shell(
        "/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
        "sys.stdout.write(d[\"t\"].format(**d[\"row\"]))' " +
            shell_quote(dir / "template.json") + " 2>" + shell_quote(dir / "err.txt"),
        dir / "err.txt");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
}

}  // namespace

TEST(DatasetFile, ReadsLongBenchLinesAndNamesTheLineOfABadOne) {
    TempDir dir{"dataset_file"};
    const fs::path file = dir / "d.jsonl";
    write_text(file,
               "{\"input\": \"q1\", \"context\": \"c1\", \"answers\": [\"a\", \"b\"], \"all_classes\": null, "
               "\"length\": 5, \"_id\": \"x1\"}\n"
               "\n"
               "{\"prompt\": \"p\", \"answers\": \"only\", \"all_classes\": [\"k1\", \"k2\"]}\n");
    const std::vector<DatasetSample> s = read_dataset_jsonl(file);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].index, 0);
    EXPECT_EQ(s[0].id, "x1");
    EXPECT_EQ(s[0].answers, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(s[0].all_classes.empty());
    EXPECT_EQ(s[1].index, 1);
    EXPECT_EQ(s[1].line, 3);  // the blank line is skipped but counted
    EXPECT_EQ(s[1].answers, (std::vector<std::string>{"only"}));
    EXPECT_EQ(s[1].all_classes, (std::vector<std::string>{"k1", "k2"}));

    const std::vector<std::pair<std::string, std::string>> bad = {
        {"{\"answers\": [\"a\"]}\n[1, 2]\n", "d.jsonl:2: expected a JSON object per line, found array"},
        {"{\"answers\": [\"a\"]}\n{\"answers\": \n", "d.jsonl:2: not valid JSON"},
        {"{\"input\": \"q\"}\n", "d.jsonl:1: no \"answers\" field"},
        {"{\"answers\": [1]}\n", "d.jsonl:1: \"answers\" is array, expected a string or an array of strings"},
        {"{\"answers\": \"a\", \"all_classes\": \"x\"}\n", "d.jsonl:1: \"all_classes\" is string"},
        {"{\"answers\": \"a\", \"_id\": 7}\n", "d.jsonl:1: \"_id\" is number"},
        {"\n\n", "d.jsonl: no samples"},
    };
    for (const auto& [text, message] : bad) {
        write_text(file, text);
        EXPECT_NE(error_of([&] { read_dataset_jsonl(file); }).find(message), std::string::npos)
            << error_of([&] { read_dataset_jsonl(file); });
    }
}

TEST(DatasetFile, TemplatesFormatAsPythonsStrFormat) {
    TempDir dir{"dataset_template"};
    const nlohmann::json row = {{"context", "Ünïcode {not a field} text\nwith lines"},
                                {"input", "What is it?"},
                                {"length", 1234},
                                {"_id", "z"}};
    for (const std::string t :
         {"You are given a scientific article and a question.\n\nArticle: {context}\n\n Question: {input}\n\nAnswer:",
          "{{literal}} {input}{input} }} {{", "{length} words: {context}", "no fields at all", ""}) {
        SCOPED_TRACE(t);
        EXPECT_EQ(format_prompt_template(t, sample_of(row), "t.json"), python_format(t, row, dir.path()));
    }
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"{missing}", "names field \"missing\""},
        {"{input:>10}", "template field \"{input:>10}\""},
        {"{input!r}", "template field \"{input!r}\""},
        {"{0}", "template field \"{0}\""},
        {"{}", "template field \"{}\""},
        {"a } b", "single '}'"},
        {"a { b", "never closed"},
        {"{_id} {length}", ""},  // fine: strings and integers
    };
    for (const auto& refusal : refused) {
        // References, not a structured binding: clang 14 cannot capture a binding in a lambda.
        const std::string &t = refusal.first, &message = refusal.second;
        const std::string error = error_of([&] { format_prompt_template(t, sample_of(row), "t.json"); });
        if (message.empty()) {
            EXPECT_EQ(error, "(no error)");
        } else {
            EXPECT_NE(error.find("t.json: "), std::string::npos) << error;
            EXPECT_NE(error.find(message), std::string::npos) << error;
        }
    }
    EXPECT_NE(error_of([&] {
                  format_prompt_template("{x}", sample_of({{"x", 1.5}}), "t.json");
              }).find("field \"x\" of sample 0 (line 1 of the dataset) is number"),
              std::string::npos);
}

TEST(DatasetFile, PromptAndLengthFilesNameTheMissingDataset) {
    TempDir dir{"dataset_configs"};
    write_text(dir / "prompt.json", "{\"qasper\": \"{context}\", \"bad\": 3}");
    write_text(dir / "maxlen.json", "{\"qasper\": 128, \"bad\": 0}");
    EXPECT_EQ(read_dataset_prompt_template(dir / "prompt.json", "qasper"), "{context}");
    EXPECT_EQ(read_dataset_max_new_tokens(dir / "maxlen.json", "qasper"), 128);
    EXPECT_NE(error_of([&] {
                  read_dataset_prompt_template(dir / "prompt.json", "hotpotqa");
              }).find("no prompt template for dataset \"hotpotqa\""),
              std::string::npos);
    EXPECT_NE(error_of([&] { read_dataset_prompt_template(dir / "prompt.json", "bad"); }).find("expected a string"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  read_dataset_max_new_tokens(dir / "maxlen.json", "bad");
              }).find("the answer length of \"bad\" is 0, expected a positive integer"),
              std::string::npos);
    write_text(dir / "list.json", "[1]");
    EXPECT_NE(error_of([&] {
                  read_dataset_max_new_tokens(dir / "list.json", "qasper");
              }).find("expected a JSON object of dataset name -> value"),
              std::string::npos);
}

TEST(DatasetPrompt, MiddleCutKeepsExactlyTheRequestedTokens) {
    const std::vector<int32_t> ten{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    EXPECT_EQ(truncate_middle(ten, 4), (std::vector<int32_t>{0, 1, 8, 9}));
    EXPECT_EQ(truncate_middle(ten, 5), (std::vector<int32_t>{0, 1, 7, 8, 9}));
    EXPECT_EQ(truncate_middle(ten, 9), (std::vector<int32_t>{0, 1, 2, 3, 5, 6, 7, 8, 9}));
    EXPECT_EQ(truncate_middle(ten, 10), ten);
    EXPECT_EQ(truncate_middle(ten, 64), ten);

    const auto model = load_model_and_tokenizer(kRetrievalModel);
    const int32_t bos = sequence_start_token(model->weights.config, model->tokenizer.get());
    const std::string text = "The grass is green. The sky is blue. The sun is yellow. Here we go.";
    const std::vector<int32_t> ids = model->tokenizer->encode(text);
    const DatasetPromptTokens whole = dataset_prompt_tokens(text, *model->tokenizer, bos, 1000);
    EXPECT_EQ(whole.tokens.front(), bos);
    EXPECT_EQ(whole.full_tokens, static_cast<int64_t>(ids.size()) + 1);
    EXPECT_EQ(whole.cut_at, -1);
    const DatasetPromptTokens cut = dataset_prompt_tokens(text, *model->tokenizer, bos, 10);
    ASSERT_EQ(cut.tokens.size(), 10u);
    EXPECT_EQ(cut.cut_at, 5);
    EXPECT_EQ(cut.full_tokens, whole.full_tokens);
    EXPECT_EQ(std::vector<int32_t>(cut.tokens.begin(), cut.tokens.begin() + 5),
              std::vector<int32_t>(whole.tokens.begin(), whole.tokens.begin() + 5));
    EXPECT_EQ(std::vector<int32_t>(cut.tokens.begin() + 5, cut.tokens.end()),
              std::vector<int32_t>(whole.tokens.end() - 5, whole.tokens.end()));
}

namespace {

/// A LongBench-format dataset of pass-key questions at 1024 tokens (the prompts the retrieval model answers), split
/// as LongBench's files are: context and input fields joined by a dataset2prompt.json template.
class DatasetTask : public ::testing::Test {
  protected:
    TempDir dir_{"dataset_task"};
    fs::path results_ = dir_ / "results";
    fs::path jsonl_ = dir_ / "passkey.jsonl";
    std::vector<std::string> keys_;

    void write_dataset(int n) {
        const auto model = load_model_and_tokenizer(kRetrievalModel);
        const int32_t bos = sequence_start_token(model->weights.config, model->tokenizer.get());
        const std::vector<std::string> haystack = haystack_sentences(kFillerHaystack, "filler");
        std::string lines;
        for (int i = 0; i < n; ++i) {
            const TaskSample s = make_task_sample({TaskKind::Passkey, 7, 1024, 100.0 * i / std::max(1, n - 1), i},
                                                  haystack, *model->tokenizer, bos);
            const std::size_t question = s.prompt.rfind('\n');
            lines += nlohmann::json{{"context", s.prompt.substr(0, question)},
                                    {"input", s.prompt.substr(question + 1)},
                                    {"answers", s.expected},
                                    {"all_classes", nullptr},
                                    {"length", 1000},
                                    {"_id", "pk" + std::to_string(i)}}
                         .dump() +
                     "\n";
            keys_.push_back(s.expected.front());
        }
        write_text(jsonl_, lines);
        write_text(dir_ / "dataset2prompt.json", "{\"passkey_qa\": \"{context}\\n{input}\"}");
        write_text(dir_ / "dataset2maxlen.json", "{\"passkey_qa\": 12}");
    }
    CommandResult task(const std::string& args, const fs::path& results) {
        return run_kascade("task --results " + shell_quote(results) + " --model " + shell_quote(kRetrievalModel) +
                           " --dataset " + shell_quote(jsonl_) + " --dataset-name passkey_qa --prompt-file " +
                           shell_quote(dir_ / "dataset2prompt.json") + " --maxlen-file " +
                           shell_quote(dir_ / "dataset2maxlen.json") + " --metric qa_f1_score " + args);
    }
    std::vector<std::vector<std::string>> samples(const fs::path& results) {
        return db_rows(results / "kascade.db",
                       "SELECT sample_index, sample_id, prompt_tokens, full_tokens, cut_at, answers_json, generated, "
                       "score, generated_tokens, printf('%.9f', density) FROM dataset_samples ORDER BY sample_index");
    }
};

TEST_F(DatasetTask, RetrievalModelAnswersTheDatasetAndTheCutIsStored) {
    write_dataset(4);
    const CommandResult r = task("--method dense --json", results_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("score").get<double>(), 1.0) << r.out;
    EXPECT_EQ(j.at("samples_run").get<int>(), 4);
    EXPECT_EQ(j.at("truncated").get<int>(), 0);
    const auto rows = samples(results_);
    ASSERT_EQ(rows.size(), 4u);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(rows[i][1], "pk" + std::to_string(i));
        EXPECT_EQ(rows[i][2], "1024");  // BOS + the prompt, as the generated task made it
        EXPECT_EQ(rows[i][4], "NULL");
        EXPECT_NE(rows[i][6].find(keys_[static_cast<std::size_t>(i)]), std::string::npos) << rows[i][6];
    }

    // Cut to 800 tokens: head 400 and tail 400 are read; the needle at depth 0 sits in the head, so the first
    // sample is still answered. Oracle top-k at 10 % reads the same prompts.
    const CommandResult cut = task("--method oracle --topk-pct 10 --k-min 32 --max-length 800 --json", results_);
    ASSERT_EQ(cut.exit_code, 0) << cut.err;
    EXPECT_EQ(nlohmann::json::parse(cut.out).at("truncated").get<int>(), 4);
    const auto cut_rows =
        db_rows(results_ / "kascade.db",
                "SELECT prompt_tokens, full_tokens, cut_at, score FROM dataset_samples_flat WHERE max_length = 800 "
                "ORDER BY sample_index");
    ASSERT_EQ(cut_rows.size(), 4u);
    for (const auto& row : cut_rows) EXPECT_EQ(row[0] + " " + row[1] + " " + row[2], "800 1024 400");
    EXPECT_EQ(cut_rows[0][3], "1.0");

    // query datasets: one row per run, the dense one scored 1.
    const CommandResult q = run_kascade("query datasets --results " + shell_quote(results_) + " --format json");
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const nlohmann::json table = nlohmann::json::parse(q.out);
    ASSERT_EQ(table.size(), 2u) << q.out;
    EXPECT_EQ(table[0].at("method"), "dense");
    EXPECT_EQ(table[0].at("dataset_name"), "passkey_qa");
    EXPECT_EQ(table[0].at("metric"), "qa_f1_score");
    EXPECT_EQ(table[0].at("score").get<double>(), 1.0);
    EXPECT_EQ(table[1].at("cut").get<int>(), 4);
}

TEST_F(DatasetTask, KilledRunResumesToTheRowsOfAnUninterruptedRun) {
    write_dataset(12);
    const std::string args = "--method oracle --topk-pct 10 --k-min 32";
    const fs::path whole = dir_ / "whole";
    ASSERT_EQ(task(args, whole).exit_code, 0);

    // exec: the kill reaches kascade itself, not a shell around it.
    const pid_t pid = start_shell(
        "exec " + shell_quote(KASCADE_BIN) + " task --results " + shell_quote(results_) + " --model " +
        shell_quote(kRetrievalModel) + " --dataset " + shell_quote(jsonl_) +
        " --dataset-name passkey_qa --prompt-file " + shell_quote(dir_ / "dataset2prompt.json") + " --maxlen-file " +
        shell_quote(dir_ / "dataset2maxlen.json") + " --metric qa_f1_score " + args + " >/dev/null 2>&1");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    int stored = 0;
    while (std::chrono::steady_clock::now() < deadline && stored < 2) {
        if (fs::exists(results_ / "kascade.db")) {
            // Until the database and its tables exist, the query fails.
            const auto rows = try_db_rows(results_ / "kascade.db", "SELECT count(*) FROM dataset_samples");
            if (rows && !rows->empty()) stored = std::stoi(rows->front()[0]);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it was killed (" << stored << " samples)";
    const int at_kill = std::stoi(db_value(results_ / "kascade.db", "SELECT count(*) FROM dataset_samples"));
    EXPECT_LT(at_kill, 12);

    const CommandResult resumed = task(args + " --json", results_);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const nlohmann::json j = nlohmann::json::parse(resumed.out);
    EXPECT_EQ(j.at("samples_stored").get<int>(), at_kill);
    EXPECT_EQ(j.at("samples_run").get<int>(), 12 - at_kill);
    EXPECT_EQ(samples(results_), samples(whole));
    EXPECT_EQ(db_value(results_ / "kascade.db", "SELECT count(*) FROM task_runs"), "1");
}

TEST_F(DatasetTask, BatchedSamplesAnswerAsSamplesRunOneAtATime) {
    // Five samples in batches of three (3 + 2): the retrieval model answers each as a run of one sample at a time
    // does (dense and a 10 % oracle budget), and the batch is stored per sample.
    write_dataset(5);
    const fs::path alone = dir_ / "alone";
    for (const std::string method : {"--method dense", "--method oracle --topk-pct 10 --k-min 32"}) {
        SCOPED_TRACE(method);
        const fs::path one = alone / method.substr(9, 6), batched = results_ / method.substr(9, 6);
        ASSERT_EQ(task(method, one).exit_code, 0);
        const CommandResult r = task(method + " --batch 3 --json", batched);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(nlohmann::json::parse(r.out).at("samples_run").get<int>(), 5);
        ASSERT_EQ(samples(batched).size(), 5u);
        EXPECT_EQ(samples(batched), samples(one));
        EXPECT_EQ(db_value(batched / "kascade.db",
                           "SELECT group_concat(batch, ',') FROM (SELECT batch FROM dataset_samples_flat ORDER BY "
                           "sample_index)"),
                  "3,3,3,2,2");
    }
    EXPECT_EQ(db_value(results_ / "dense" / "kascade.db", "SELECT min(score) FROM dataset_samples"), "1.0");
}

TEST_F(DatasetTask, BadInputIsAnErrorThatWritesNothing) {
    write_dataset(1);
    write_text(dir_ / "bad.jsonl", "{\"answers\": [\"1\"], \"context\": \"c\", \"input\": \"i\"}\n{\"context\": 1}\n");
    write_text(dir_ / "zh.json", "{\"multifieldqa_zh\": \"{context}\"}");
    const std::string model = " --model " + shell_quote(kRetrievalModel) + " --method dense";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--dataset " + shell_quote(jsonl_), "--dataset needs --dataset-name"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name passkey_qa --max-new-tokens 8",
         "is not a LongBench dataset, so its metric is unknown: give --metric"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name multifieldqa_zh --max-new-tokens 8",
         "no Chinese metric is implemented"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name qasper",
         "the answer length: --maxlen-file dataset2maxlen.json or --max-new-tokens N"},
        {"--dataset " + shell_quote(dir_ / "bad.jsonl") + " --dataset-name qasper --max-new-tokens 8",
         "bad.jsonl:2: no \"answers\" field"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name qasper --max-new-tokens 8 --prompt-file " +
             shell_quote(dir_ / "zh.json"),
         "no prompt template for dataset \"qasper\""},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name qasper --max-new-tokens 8",
         "has no \"prompt\" field (give --prompt-file"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name passkey_qa --max-new-tokens 8 --max-length 40000 " +
             "--prompt-file " + shell_quote(dir_ / "dataset2prompt.json") + " --metric qa_f1_score",
         "invalid --max-length 40000"},
        {"--dataset " + shell_quote(jsonl_) + " --dataset-name qasper --lengths 1024", "excludes --dataset"},
        {"--dataset-name qasper", "--dataset-name requires --dataset"},
    };
    for (const auto& [args, message] : cases) {
        SCOPED_TRACE(args);
        const CommandResult r = run_kascade("task --results " + shell_quote(results_) + model + " " + args);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(results_)) << "a refused command created the results folder";
    }
}

TEST(DatasetTaskSchema, CheckListsEqualTheNameTables) {
    // The store refuses a name the code would not write, and admits every name it writes.
    TempDir dir{"dataset_schema"};
    { ResultsDb db(dir.path()); }
    const std::string sql = db_value(dir / "kascade.db", "SELECT sql FROM sqlite_master WHERE name = 'task_runs'");
    auto check_list = [&](const std::string& column) {
        const std::string head = column + " IN (";
        const std::size_t begin = sql.find(head, sql.find(column + " ") + column.size()) + head.size();
        std::vector<std::string> names;
        const std::string list = sql.substr(begin, sql.find(')', begin) - begin);
        for (std::size_t q = list.find('\''); q != std::string::npos; q = list.find('\'', list.find('\'', q + 1) + 1))
            names.push_back(list.substr(q + 1, list.find('\'', q + 1) - q - 1));
        return names;
    };
    EXPECT_EQ(check_list("chat_template"), mode_names<ChatTemplate>());
    std::vector<std::string> metrics = {"number_match", "string_match_all", "string_match_part"};
    for (const std::string& m : mode_names<LongBenchMetric>()) metrics.push_back(m);
    EXPECT_EQ(check_list("metric"), metrics);
}

}  // namespace
