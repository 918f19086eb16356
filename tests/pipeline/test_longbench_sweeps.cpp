// The paper's LongBench sweep files (experiments/longbench-llama31-8b.toml, longbench-qwen3-8b.toml) run end to end:
// each file, scaled to a small random-weights model of its family, plans and runs its capture, schedule and dataset
// task jobs for every method it names, on two LongBench-format datasets made here (one that LongBench puts through
// the chat template, one it gives as is), and `kascade query datasets` then holds one scored run per method and
// dataset with the chat template LongBench's rule gives; the sweep's report has a row per method and a column per
// dataset.
//
// Scaled, not as published: the files' layer lists (anchors up to 23, OmniKV filtering at 18) need the real depth, and
// the real width at the 4 layers OmniKV needs (a filter layer from 2 on, then a dense layer, then one that reuses)
// would be 1.7 GB of random weights per run. So the models keep each family's particulars (Llama 3.1's rope scaling
// and untied head, Qwen3's q/k norms, GQA, head_dim 128, the vocabulary of the tokenizer used) at hidden size 512,
// and the test rewrites the files' layer lists, context and dataset names; every other line runs as written.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "pipeline/sweep_fixture.h"

namespace {

const fs::path kSource = KASCADE_SOURCE_DIR;

/// `text` with `from` replaced by `to`, which must occur (a test of a file that changed would otherwise pass).
std::string replace_once(std::string text, const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << "the sweep file no longer has: " << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
}

/// A 4-layer model of `config_file`'s family at hidden size 512 (4 query heads and 1 KV head of 128).
fs::path write_small_model(const fs::path& config_file, int vocab, const fs::path& dir) {
    nlohmann::json config = nlohmann::json::parse(std::ifstream(config_file));
    config["hidden_size"] = 512;
    config["intermediate_size"] = 1024;
    config["num_attention_heads"] = 4;
    config["num_key_value_heads"] = 1;
    config["head_dim"] = 128;
    config["vocab_size"] = vocab;
    // Special ids within the vocabulary of the tokenizer used (Qwen's 151643 is not in SmolLM2's 49,152).
    if (config["bos_token_id"].get<int>() >= vocab) config["bos_token_id"] = 1;
    if (config["eos_token_id"].get<int>() >= vocab) config["eos_token_id"] = 2;
    const fs::path out = dir / "model";
    write_text(dir / "config.json", config.dump(2));
    const CommandResult r = run_kascade("random-model --config " + shell_quote(dir / "config.json") + " --out " +
                                        shell_quote(out) + " --layers 4 --seed 3");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return out;
}

/// LongBench's layout: data/<name>.jsonl and config/dataset2prompt.json, dataset2maxlen.json (templates written here).
fs::path write_longbench_folder(const fs::path& dir) {
    fs::create_directories(dir / "data");
    fs::create_directories(dir / "config");
    const std::string context =
        "The committee met on Tuesday. It approved the budget of 4,200 dollars for the new library wing, and the "
        "chair thanked the volunteers who had painted the reading room.";
    write_text(dir / "data/qasper.jsonl", nlohmann::json{{"input", "What budget was approved?"},
                                                         {"context", context},
                                                         {"answers", {"4,200 dollars"}},
                                                         {"all_classes", nullptr},
                                                         {"length", 30},
                                                         {"_id", "q0"}}
                                                  .dump() +
                                              "\n");
    write_text(dir / "data/trec.jsonl", nlohmann::json{{"input", "What city hosted the meeting?"},
                                                       {"context", "Question: Who chaired it?\nType: Individual\n"},
                                                       {"answers", {"City"}},
                                                       {"all_classes", {"City", "Individual", "Date"}},
                                                       {"length", 12},
                                                       {"_id", "t0"}}
                                                .dump() +
                                            "\n");
    write_text(dir / "config/dataset2prompt.json",
               nlohmann::json{{"qasper", "Article: {context}\n\nQuestion: {input}\n\nAnswer:"},
                              {"trec", "Classify the question.\n\n{context}\nQuestion: {input}\nType:"}}
                   .dump());
    write_text(dir / "config/dataset2maxlen.json", nlohmann::json{{"qasper", 6}, {"trec", 4}}.dump());
    return dir;
}

struct SweepCase {
    std::string file;            ///< under experiments/
    std::string model_variable;  ///< the ${VAR} of its [model] path
    std::string config;          ///< the family's config.json under ../shared/models/configs
    fs::path tokenizer;          ///< a real tokenizer of the family's vocabulary size or less
    int vocab = 0;
    std::vector<std::pair<std::string, std::string>> rewrites;  ///< the layer lists, for a 4-layer model
    std::set<std::string> methods;
    std::string qasper_chat_template;  ///< the file's datasets.chat_template, else what the tokenizer's
                                       ///< tokenizer_config.json is recognised as
};

void run_case(const SweepCase& c) {
    SCOPED_TRACE(c.file);
    TempDir dir{"longbench_sweep"};
    const fs::path model =
        write_small_model(kShared / "models/configs" / c.config / "config.json", c.vocab, dir.path());
    const fs::path longbench = write_longbench_folder(dir / "LongBench");

    std::ifstream in(kSource / "experiments" / c.file);
    std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    toml = replace_once(toml, "path = \"${" + c.model_variable + "}\"",
                        "path = \"${" + c.model_variable + "}\"\ntokenizer = \"" + c.tokenizer.string() + "\"");
    toml = replace_once(toml, "ctx = [4096]", "ctx = [256]");
    toml = replace_once(toml, "tokens = 16380", "tokens = 510");
    toml = replace_once(toml, "max_length = 31500", "max_length = 200");
    for (const auto& [from, to] : c.rewrites) toml = replace_once(toml, from, to);
    toml = std::regex_replace(toml, std::regex(R"(names = \[[^\]]*\])"), "names = [\"qasper\", \"trec\"]");
    const fs::path file = dir / c.file;
    write_text(file, toml);

    const fs::path results = dir / "results";
    const std::string env = c.model_variable + "=" + shell_quote(model) + " LONGBENCH=" + shell_quote(longbench) +
                            " KASCADE_ASSETS=" + shell_quote(kShared);
    const CommandResult sweep =
        run_shell(env + " " + shell_quote(KASCADE_BIN) + " sweep " + shell_quote(file) + " --results " +
                      shell_quote(results) + " 2>" + shell_quote(dir / "err.txt"),
                  dir / "err.txt");
    ASSERT_EQ(sweep.exit_code, 0) << sweep.err << sweep.out;

    const CommandResult q = run_kascade("query datasets --results " + shell_quote(results) + " --format json");
    ASSERT_EQ(q.exit_code, 0) << q.err;
    const nlohmann::json rows = nlohmann::json::parse(q.out);
    std::set<std::pair<std::string, std::string>> seen;
    for (const nlohmann::json& row : rows) {
        const std::string dataset = row.at("dataset_name"), method = row.at("method");
        seen.emplace(dataset, method);
        EXPECT_EQ(row.at("samples").get<int>(), 1) << row;
        EXPECT_GE(row.at("score").get<double>(), 0.0);
        EXPECT_LE(row.at("score").get<double>(), 1.0);
        // LongBench's pred.py: qasper goes through the instruct model's template, trec (few-shot) as is.
        EXPECT_EQ(row.at("chat_template"), dataset == "qasper" ? c.qasper_chat_template : "none") << row;
        EXPECT_EQ(row.at("metric"), dataset == "qasper" ? "qa_f1_score" : "classification_score");
        EXPECT_EQ(row.at("max_length").get<int>(), 200);
        if (method == "kascade") {
            EXPECT_EQ(row.at("topk_pct").get<double>(), 10.0);
        }
    }
    for (const std::string dataset : {"qasper", "trec"})
        for (const std::string& method : c.methods)
            EXPECT_TRUE(seen.count({dataset, method})) << dataset << " " << method << " missing in " << q.out;
    EXPECT_EQ(rows.size(), 2 * c.methods.size());

    // The sweep's report shows them: a row per method, a column per dataset.
    const std::string html = kascade::read_file(results / "reports" / fs::path(c.file).stem() / "index.html");
    std::smatch table;
    ASSERT_TRUE(std::regex_search(html, table, std::regex("<table id=\"dataset-scores\">([\\s\\S]*?)</table>")))
        << sweep.out;
    const std::string body = table[1];
    EXPECT_NE(body.find("<th>qasper</th><th>trec</th><th>average</th>"), std::string::npos) << body;
    const std::regex row_start("<tr>");
    const auto row_count =
        std::distance(std::sregex_iterator(body.begin(), body.end(), row_start), std::sregex_iterator());
    EXPECT_EQ(row_count, static_cast<long>(c.methods.size()) + 1) << body;  // and the header
}

}  // namespace

TEST(LongBenchSweeps, Llama31FileRunsEndToEnd) {
    run_case({.file = "longbench-llama31-8b.toml",
              .model_variable = "LLAMA31_8B",
              .config = "llama-3.1-8b",
              .tokenizer = kShared / "models/tokenizers/llama-3/tokenizer.model",
              .vocab = 128256,
              .rewrites = {{"anchor_list = [0, 2, 8, 13, 14]", "anchor_list = [0, 2]"},
                           {"omnikv_filter_layers = [2, 8, 18]", "omnikv_filter_layers = [2]"},
                           {"lessismore_selection_layers = [2, 13]", "lessismore_selection_layers = [1]"}},
              .methods = {"dense", "kascade", "streaming", "quest", "omnikv", "lessismore"},
              .qasper_chat_template = "llama3"});
}

TEST(LongBenchSweeps, Qwen3FileRunsEndToEnd) {
    run_case({.file = "longbench-qwen3-8b.toml",
              .model_variable = "QWEN3_8B",
              .config = "qwen3-0.6b",
              .tokenizer = kShared / "models/smollm2-135m-tokenizer/tokenizer.json",
              .vocab = 49152,
              .rewrites = {{"anchor_list = [0, 2, 7, 14, 23]", "anchor_list = [0, 2]"},
                           {"lessismore_selection_layers = [2, 12]", "lessismore_selection_layers = [1]"}},
              .methods = {"dense", "kascade", "streaming", "quest", "lessismore"},
              .qasper_chat_template = "qwen3-no-thinking"});
}
