// pipeline/stages/eval_method.cpp: the one string mapping of the evaluation method and phase.
#include "pipeline/stages/eval_method.h"

#include "pipeline/stages/enum_names.h"

namespace kascade {

namespace {

constexpr EnumNames<EvalMethod, 7> kMethodNames{{{EvalMethod::Dense, "dense"},
                                                 {EvalMethod::Kascade, "kascade"},
                                                 {EvalMethod::Oracle, "oracle"},
                                                 {EvalMethod::Streaming, "streaming"},
                                                 {EvalMethod::Quest, "quest"},
                                                 {EvalMethod::OmniKv, "omnikv"},
                                                 {EvalMethod::LessIsMore, "lessismore"}}};
constexpr EnumNames<EvalPhase, 2> kPhaseNames{{{EvalPhase::Prefill, "prefill"}, {EvalPhase::Decode, "decode"}}};

}  // namespace

std::string_view eval_method_name(EvalMethod method) {
    return enum_name(kMethodNames, method);
}
std::optional<EvalMethod> eval_method_from_name(std::string_view name) {
    return enum_value(kMethodNames, name);
}
const std::vector<std::string>& eval_method_names() {
    static const std::vector<std::string> names = all_enum_names(kMethodNames);
    return names;
}
EvalMethod parse_eval_method(std::string_view name, std::string_view option) {
    return parse_enum_name(kMethodNames, name, option);
}

bool is_decode_only_method(EvalMethod method) {
    return method == EvalMethod::Quest || method == EvalMethod::OmniKv || method == EvalMethod::LessIsMore;
}

std::string_view eval_phase_name(EvalPhase phase) {
    return enum_name(kPhaseNames, phase);
}
std::optional<EvalPhase> eval_phase_from_name(std::string_view name) {
    return enum_value(kPhaseNames, name);
}
const std::vector<std::string>& eval_phase_names() {
    static const std::vector<std::string> names = all_enum_names(kPhaseNames);
    return names;
}
EvalPhase parse_eval_phase(std::string_view name, std::string_view option) {
    return parse_enum_name(kPhaseNames, name, option);
}

}  // namespace kascade
