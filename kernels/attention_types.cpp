// kernels/attention_types.cpp: the one string mapping of each selection mode (used by the CLI, sweep files, the
// results database and content keys alike).
#include "kernels/attention_types.h"

#include <array>
#include <utility>

namespace kascade {
namespace {

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& names, E value) {
    for (const auto& [e, name] : names)
        if (e == value) return name;
    return "?";
}

template <typename E, size_t N>
std::optional<E> value_of(const std::array<std::pair<E, std::string_view>, N>& names, std::string_view name) {
    for (const auto& [e, n] : names)
        if (n == name) return e;
    return std::nullopt;
}

constexpr std::array<std::pair<KeyGranularity, std::string_view>, 2> kGranularityNames{
    {{KeyGranularity::Token, "token"}, {KeyGranularity::Tile, "tile"}}};
constexpr std::array<std::pair<Pooling, std::string_view>, 2> kPoolingNames{
    {{Pooling::PostSoftmax, "post_softmax"}, {Pooling::PreSoftmax, "pre_softmax"}}};
constexpr std::array<std::pair<KRule, std::string_view>, 3> kKRuleNames{
    {{KRule::Sequence, "sequence"}, {KRule::Rolling, "rolling"}, {KRule::Visible, "visible"}}};

}  // namespace

std::string_view key_granularity_name(KeyGranularity g) {
    return name_of(kGranularityNames, g);
}
std::optional<KeyGranularity> key_granularity_from_name(std::string_view name) {
    return value_of(kGranularityNames, name);
}
std::string_view pooling_name(Pooling p) {
    return name_of(kPoolingNames, p);
}
std::optional<Pooling> pooling_from_name(std::string_view name) {
    return value_of(kPoolingNames, name);
}
std::string_view k_rule_name(KRule r) {
    return name_of(kKRuleNames, r);
}
std::optional<KRule> k_rule_from_name(std::string_view name) {
    return value_of(kKRuleNames, name);
}

}  // namespace kascade
