// base/enum_names.h: an enum's one string mapping, and the lookups everything uses to go between a mode and its
// name: the CLI's options, the sweep files' keys, the results database's columns, the content keys and the report.
//
// A mode's names are one constexpr table of (value, name) pairs, declared once as a specialisation of EnumNameTable
// (base/modes.h holds those of every mode the layers share; a layer's own modes, such as the task kinds, declare
// theirs beside the enum). Everything else goes through the four functions below, so a name is written exactly once
// and a misspelt one gets the same "did you mean" wherever it is read. (Models: DuckDB's EnumUtil, llama.cpp's
// LLM_ARCH_NAMES.)
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "base/closest_match.h"
#include "base/error.h"

namespace kascade {

template <typename E, size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

/// Specialised for each mode E with `static constexpr EnumNames<E, N> names`, every value of E exactly once, in the
/// order help texts and error messages list them.
template <typename E>
struct EnumNameTable;

template <typename E>
inline std::string_view mode_name(E value) {
    for (const auto& [e, name] : EnumNameTable<E>::names)
        if (e == value) return name;
    KASCADE_ASSERT(false && "enum value without a name");
    return "?";
}

template <typename E>
inline std::optional<E> mode_from_name(std::string_view name) {
    for (const auto& [e, n] : EnumNameTable<E>::names)
        if (n == name) return e;
    return std::nullopt;
}

/// Every name of E, in table order.
template <typename E>
const std::vector<std::string>& mode_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& [e, n] : EnumNameTable<E>::names) out.emplace_back(n);
        return out;
    }();
    return names;
}

/// "invalid WHERE='NAME' (expected a, b, c); did you mean b?": the one message for a name E does not have, where
/// `where` says where it was read: a CLI option ("--method"), a sweep file key ("baselines.methods"), a database
/// column ("column method").
template <typename E>
std::string unknown_mode_message(std::string_view name, std::string_view where) {
    const std::vector<std::string>& choices = mode_names<E>();
    const std::string suggestion = closest_match(name, choices);
    return fmt::format("invalid {}='{}' (expected {}){}", where, name, fmt::join(choices, ", "),
                       suggestion.empty() ? "" : fmt::format("; did you mean {}?", suggestion));
}

/// Name -> value, else kascade::Error with unknown_mode_message.
template <typename E>
E parse_mode(std::string_view name, std::string_view where) {
    if (const std::optional<E> e = mode_from_name<E>(name)) return *e;
    KASCADE_FAIL("{}", unknown_mode_message<E>(name, where));
}

}  // namespace kascade
