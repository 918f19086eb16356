// pipeline/tasks/dataset_file.h: a task dataset as users hold it. A JSONL file, one sample per line, in LongBench's
// field layout (input, context, answers, all_classes, length, _id) or any layout with `prompt` and `answers`; the
// prompt template of a dataset from LongBench's dataset2prompt.json (or a file of the same form the user writes) and
// its answer length from dataset2maxlen.json. kascade ships no third-party prompt text: the user gives these files.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kascade {

struct DatasetSample {
    int index = 0;       ///< 0-based among the file's non-blank lines: the sample's identity in a task run
    int line = 0;        ///< 1-based line in the file, for messages
    std::string id;      ///< LongBench's `_id`, empty if the line has none
    nlohmann::json row;  ///< the whole JSON object, whose fields a prompt template names
    std::vector<std::string> answers;
    std::vector<std::string> all_classes;  ///< LongBench's classification datasets name their classes; else empty
};

/// Every sample of a JSONL file. An error names the file, the line and the field: a line that is not a JSON object,
/// `answers` missing or not a string / array of strings, `all_classes` neither null nor an array of strings, `_id`
/// not a string. An empty file is an error too.
std::vector<DatasetSample> read_dataset_jsonl(const std::filesystem::path& path);
/// The same on the file's contents already read (`path` names it in the errors).
std::vector<DatasetSample> parse_dataset_jsonl(std::string_view text, const std::filesystem::path& path);

/// The entry `name` of a dataset2prompt.json-style file (a JSON object of name -> template string). An error names
/// the file and the dataset if the file is not such an object or has no string entry of that name.
std::string read_dataset_prompt_template(const std::filesystem::path& path, std::string_view name);

/// The entry `name` of a dataset2maxlen.json-style file (a JSON object of name -> positive integer).
int read_dataset_max_new_tokens(const std::filesystem::path& path, std::string_view name);

/// A prompt from a template the way LongBench's pred.py makes it, prompt_format.format(**json_obj): every {field}
/// is replaced by the sample's field (a string as is, an integer in decimal), "{{" and "}}" are literal braces.
/// Python's format specs and conversions ({x:>10}, {x!r}), positional fields and attribute or index access are not
/// used by LongBench's templates and are refused, as are fields the sample lacks and unbalanced braces; the error
/// names `template_source`, the field and the sample's line.
std::string format_prompt_template(std::string_view prompt_template, const DatasetSample& sample,
                                   std::string_view template_source);

/// The sample's prompt without a template: its `prompt` field, which must be a string.
std::string dataset_sample_prompt(const DatasetSample& sample, const std::filesystem::path& dataset);

}  // namespace kascade
