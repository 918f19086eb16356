// pipeline/tasks/dataset_file.cpp: reading JSONL task datasets, their prompt templates and answer lengths.
#include "pipeline/tasks/dataset_file.h"

#include <limits>

#include "base/error.h"
#include "io/file_util.h"

namespace kascade {

namespace {

/// A string or an array of strings as a list (LongBench's answers are arrays; a hand-made dataset may give one
/// string). null and absent are not accepted here: the caller decides whether the field may be missing.
std::optional<std::vector<std::string>> string_list(const nlohmann::json& value) {
    if (value.is_string()) return std::vector<std::string>{value.get<std::string>()};
    if (!value.is_array()) return std::nullopt;
    std::vector<std::string> out;
    for (const nlohmann::json& item : value) {
        if (!item.is_string()) return std::nullopt;
        out.push_back(item.get<std::string>());
    }
    return out;
}

nlohmann::json read_json_object(const std::filesystem::path& path, std::string_view what) {
    const std::string text = read_file(path);
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    KASCADE_CHECK(!doc.is_discarded(), "{}: not valid JSON (expected a {} file: an object of dataset name -> value)",
                  path.string(), what);
    KASCADE_CHECK(doc.is_object(), "{}: expected a JSON object of dataset name -> value (a {} file), found {}",
                  path.string(), what, doc.type_name());
    return doc;
}

}  // namespace

std::vector<DatasetSample> read_dataset_jsonl(const std::filesystem::path& path) {
    return parse_dataset_jsonl(read_file(path), path);
}

std::vector<DatasetSample> parse_dataset_jsonl(std::string_view text, const std::filesystem::path& path) {
    std::vector<DatasetSample> samples;
    std::size_t begin = 0;
    for (int line_no = 1; begin < text.size(); ++line_no) {
        std::size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        const std::string_view line = text.substr(begin, end - begin);
        begin = end + 1;
        if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;

        nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        KASCADE_CHECK(!row.is_discarded(), "{}:{}: not valid JSON (expected one JSON object per line)", path.string(),
                      line_no);
        KASCADE_CHECK(row.is_object(), "{}:{}: expected a JSON object per line, found {}", path.string(), line_no,
                      row.type_name());
        DatasetSample s;
        s.index = static_cast<int>(samples.size());
        s.line = line_no;
        KASCADE_CHECK(row.contains("answers"), "{}:{}: no \"answers\" field (expected an array of answer strings)",
                      path.string(), line_no);
        auto answers = string_list(row["answers"]);
        KASCADE_CHECK(answers.has_value(), "{}:{}: \"answers\" is {}, expected a string or an array of strings",
                      path.string(), line_no, row["answers"].type_name());
        s.answers = std::move(*answers);
        if (row.contains("all_classes") && !row["all_classes"].is_null()) {
            auto classes = string_list(row["all_classes"]);
            KASCADE_CHECK(classes.has_value() && row["all_classes"].is_array(),
                          "{}:{}: \"all_classes\" is {}, expected null or an array of strings", path.string(), line_no,
                          row["all_classes"].type_name());
            s.all_classes = std::move(*classes);
        }
        if (row.contains("_id")) {
            KASCADE_CHECK(row["_id"].is_string(), "{}:{}: \"_id\" is {}, expected a string", path.string(), line_no,
                          row["_id"].type_name());
            s.id = row["_id"].get<std::string>();
        }
        s.row = std::move(row);
        samples.push_back(std::move(s));
    }
    KASCADE_CHECK(!samples.empty(), "{}: no samples (expected JSON lines with \"answers\" and a prompt's fields)",
                  path.string());
    return samples;
}

std::string read_dataset_prompt_template(const std::filesystem::path& path, std::string_view name) {
    const nlohmann::json doc = read_json_object(path, "dataset2prompt.json");
    const auto it = doc.find(std::string(name));
    KASCADE_CHECK(it != doc.end(), "{}: no prompt template for dataset \"{}\" (--dataset-name)", path.string(), name);
    KASCADE_CHECK(it->is_string(), "{}: the prompt template of \"{}\" is {}, expected a string", path.string(), name,
                  it->type_name());
    return it->get<std::string>();
}

int read_dataset_max_new_tokens(const std::filesystem::path& path, std::string_view name) {
    const nlohmann::json doc = read_json_object(path, "dataset2maxlen.json");
    const auto it = doc.find(std::string(name));
    KASCADE_CHECK(it != doc.end(), "{}: no answer length for dataset \"{}\" (--dataset-name)", path.string(), name);
    KASCADE_CHECK(
        it->is_number_integer() && it->get<int64_t>() >= 1 && it->get<int64_t>() <= std::numeric_limits<int>::max(),
        "{}: the answer length of \"{}\" is {}, expected a positive integer (tokens)", path.string(), name, it->dump());
    return static_cast<int>(it->get<int64_t>());
}

std::string format_prompt_template(std::string_view prompt_template, const DatasetSample& sample,
                                   std::string_view template_source) {
    std::string out;
    out.reserve(prompt_template.size());
    for (std::size_t i = 0; i < prompt_template.size(); ++i) {
        const char c = prompt_template[i];
        if (c == '}') {
            KASCADE_CHECK(i + 1 < prompt_template.size() && prompt_template[i + 1] == '}',
                          "{}: single '}}' at character {} of the prompt template (write '}}}}' for a brace)",
                          template_source, i);
            out += '}';
            ++i;
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < prompt_template.size() && prompt_template[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const std::size_t close = prompt_template.find('}', i + 1);
        KASCADE_CHECK(close != std::string_view::npos,
                      "{}: '{{' at character {} of the prompt template is never closed (write '{{{{' for a brace)",
                      template_source, i);
        const std::string_view field = prompt_template.substr(i + 1, close - i - 1);
        const bool plain = !field.empty() && field.find_first_of(":!.[{ ") == std::string_view::npos &&
                           !(field[0] >= '0' && field[0] <= '9');
        KASCADE_CHECK(plain,
                      "{}: template field \"{{{}}}\" at character {}: expected a plain field name such as {{context}} "
                      "(format specs, conversions, positions and indexing are not supported)",
                      template_source, field, i);
        const auto value = sample.row.find(std::string(field));
        KASCADE_CHECK(value != sample.row.end(),
                      "{}: the prompt template names field \"{}\", which sample {} (line {} of the dataset) does not "
                      "have",
                      template_source, field, sample.index, sample.line);
        if (value->is_string()) {
            out += value->get<std::string>();
        } else {
            KASCADE_CHECK(value->is_number_integer(),
                          "{}: field \"{}\" of sample {} (line {} of the dataset) is {}, expected a string or an "
                          "integer for the template",
                          template_source, field, sample.index, sample.line, value->type_name());
            out += value->dump();
        }
        i = close;
    }
    return out;
}

std::string dataset_sample_prompt(const DatasetSample& sample, const std::filesystem::path& dataset) {
    const auto prompt = sample.row.find("prompt");
    KASCADE_CHECK(
        prompt != sample.row.end(),
        "{}:{}: sample {} has no \"prompt\" field (give --prompt-file with --dataset-name for a template over "
        "its fields, as LongBench's dataset2prompt.json)",
        dataset.string(), sample.line, sample.index);
    KASCADE_CHECK(prompt->is_string(), "{}:{}: \"prompt\" of sample {} is {}, expected a string", dataset.string(),
                  sample.line, sample.index, prompt->type_name());
    return prompt->get<std::string>();
}

}  // namespace kascade
