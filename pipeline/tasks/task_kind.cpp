// pipeline/tasks/task_kind.cpp: the one string mapping of tasks, metrics and prefill modes, and each task's defaults.
#include "pipeline/tasks/task_kind.h"

#include "pipeline/stages/enum_names.h"

namespace kascade {

namespace {

constexpr EnumNames<TaskKind, 6> kTaskNames{{{TaskKind::Passkey, "passkey"},
                                             {TaskKind::NiahSingle, "niah_single"},
                                             {TaskKind::NiahMultikey, "niah_multikey"},
                                             {TaskKind::NiahMultivalue, "niah_multivalue"},
                                             {TaskKind::NiahMultiquery, "niah_multiquery"},
                                             {TaskKind::VariableTracking, "variable_tracking"}}};
constexpr EnumNames<TaskMetric, 3> kMetricNames{{{TaskMetric::NumberMatch, "number_match"},
                                                 {TaskMetric::StringMatchAll, "string_match_all"},
                                                 {TaskMetric::StringMatchPart, "string_match_part"}}};
constexpr EnumNames<TaskPrefill, 2> kPrefillNames{{{TaskPrefill::Sparse, "sparse"}, {TaskPrefill::Dense, "dense"}}};

}  // namespace

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

std::string_view task_kind_name(TaskKind kind) {
    return enum_name(kTaskNames, kind);
}
const std::vector<std::string>& task_kind_names() {
    static const std::vector<std::string> names = all_enum_names(kTaskNames);
    return names;
}
TaskKind parse_task_kind(std::string_view name, std::string_view option) {
    return parse_enum_name(kTaskNames, name, option);
}

std::string_view task_metric_name(TaskMetric metric) {
    return enum_name(kMetricNames, metric);
}
TaskMetric parse_task_metric(std::string_view name, std::string_view option) {
    return parse_enum_name(kMetricNames, name, option);
}

std::string_view task_prefill_name(TaskPrefill prefill) {
    return enum_name(kPrefillNames, prefill);
}
const std::vector<std::string>& task_prefill_names() {
    static const std::vector<std::string> names = all_enum_names(kPrefillNames);
    return names;
}
TaskPrefill parse_task_prefill(std::string_view name, std::string_view option) {
    return parse_enum_name(kPrefillNames, name, option);
}

}  // namespace kascade
