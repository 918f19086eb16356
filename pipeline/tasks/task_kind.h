// pipeline/tasks/task_kind.h: the long-context tasks kascade generates and scores, and how each is scored, with
// their one string mapping (CLI, sweep files, results database).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kascade {

enum class TaskKind {
    Passkey,           ///< Landmark attention's passkey: a 5-digit number hidden in filler
    NiahSingle,        ///< RULER: one "special magic number" needle
    NiahMultikey,      ///< RULER: the asked needle among needles with other keys
    NiahMultivalue,    ///< RULER: several values for one key, all asked for
    NiahMultiquery,    ///< RULER: several keys, all asked for
    VariableTracking,  ///< RULER: a chain "VAR B = VAR A" of assignments, every name of the chain asked for
};

enum class TaskMetric {
    NumberMatch,      ///< 1 if the first integer in the output is the answer, else 0 (passkey's exact match)
    StringMatchAll,   ///< fraction of the expected strings found in the output (RULER's string_match_all)
    StringMatchPart,  ///< 1 if any expected string is in the output (RULER's string_match_part)
};

/// What a task is scored with and how many tokens its answer may take: the one place of these defaults.
struct TaskDefaults {
    TaskMetric metric;
    int max_new_tokens;
};
TaskDefaults task_defaults(TaskKind kind);

std::string_view task_kind_name(TaskKind kind);
const std::vector<std::string>& task_kind_names();
/// Name -> task, else an error naming `option`, the value, the choices and the closest one.
TaskKind parse_task_kind(std::string_view name, std::string_view option);

std::string_view task_metric_name(TaskMetric metric);
TaskMetric parse_task_metric(std::string_view name, std::string_view option);

/// Whether generation prefills the prompt with the method (the paper's setting) or densely (its decode-only ablation).
enum class TaskPrefill { Sparse, Dense };
std::string_view task_prefill_name(TaskPrefill prefill);
const std::vector<std::string>& task_prefill_names();
TaskPrefill parse_task_prefill(std::string_view name, std::string_view option);

}  // namespace kascade
