// pipeline/tasks/task_kind.cpp: each task's defaults.
#include "pipeline/tasks/task_kind.h"

namespace kascade {

TaskDefaults task_defaults(TaskKind kind) {
    // Token limits: the answer (a 5- or 7-digit number per value, byte-level tokens at worst) plus room to stop.
    switch (kind) {
        case TaskKind::Passkey:
            return {TaskMetric::NumberMatch, 12};
        case TaskKind::NiahSingle:
            return {TaskMetric::StringMatchAll, 16};
        case TaskKind::NiahMultikey:
            return {TaskMetric::StringMatchAll, 16};
        case TaskKind::NiahMultivalue:
            return {TaskMetric::StringMatchAll, 48};
        case TaskKind::NiahMultiquery:
            return {TaskMetric::StringMatchAll, 48};
        case TaskKind::VariableTracking:
            return {TaskMetric::StringMatchAll, 40};
    }
    KASCADE_ASSERT(false && "task without defaults");
    return {TaskMetric::StringMatchAll, 16};
}
}  // namespace kascade
