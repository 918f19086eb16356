// pipeline/tasks/task_score.h: scoring a generated answer against the expected strings (see TaskMetric).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipeline/tasks/task_kind.h"

namespace kascade {

/// The score in [0, 1] of `output` for `expected` under `metric`. String matches ignore ASCII case, as RULER's do.
double score_task_output(TaskMetric metric, std::string_view output, const std::vector<std::string>& expected);

}  // namespace kascade
