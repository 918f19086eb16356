// pipeline/tasks/task_kind.h: the long-context tasks kascade generates and scores, and how each is scored, with
// their one string mapping (CLI, sweep files, results database; base/enum_names.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/modes.h"

namespace kascade {

enum class TaskKind {
    Passkey,           ///< Landmark attention's passkey: a 5-digit number hidden in filler
    NiahSingle,        ///< RULER: one "special magic number" needle
    NiahMultikey,      ///< RULER: the asked needle among needles with other keys
    NiahMultivalue,    ///< RULER: several values for one key, all asked for
    NiahMultiquery,    ///< RULER: several keys, all asked for
    VariableTracking,  ///< RULER: a chain "VAR B = VAR A" of assignments, every name of the chain asked for
};
template <>
struct EnumNameTable<TaskKind> {
    static constexpr EnumNames<TaskKind, 6> names{{{TaskKind::Passkey, "passkey"},
                                                   {TaskKind::NiahSingle, "niah_single"},
                                                   {TaskKind::NiahMultikey, "niah_multikey"},
                                                   {TaskKind::NiahMultivalue, "niah_multivalue"},
                                                   {TaskKind::NiahMultiquery, "niah_multiquery"},
                                                   {TaskKind::VariableTracking, "variable_tracking"}}};
};

enum class TaskMetric {
    NumberMatch,      ///< 1 if the first integer in the output is the answer, else 0 (passkey's exact match)
    StringMatchAll,   ///< fraction of the expected strings found in the output (RULER's string_match_all)
    StringMatchPart,  ///< 1 if any expected string is in the output (RULER's string_match_part)
};
template <>
struct EnumNameTable<TaskMetric> {
    static constexpr EnumNames<TaskMetric, 3> names{{{TaskMetric::NumberMatch, "number_match"},
                                                     {TaskMetric::StringMatchAll, "string_match_all"},
                                                     {TaskMetric::StringMatchPart, "string_match_part"}}};
};

/// What a task is scored with and how many tokens its answer may take: the one place of these defaults.
struct TaskDefaults {
    TaskMetric metric;
    int max_new_tokens;
};
TaskDefaults task_defaults(TaskKind kind);

// TaskPrefill, whether generation prefills the prompt with the method or densely: base/modes.h.

}  // namespace kascade
