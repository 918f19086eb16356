// pipeline/stages/enum_names.h: an enum's one string mapping as a constexpr table of (value, name) pairs, and the
// lookups every stage enum uses: value -> name, name -> value, all names, and parsing with an error that names the
// option, the value, the choices and the closest one.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "base/error.h"
#include "base/closest_match.h"

namespace kascade {

template <typename E, size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

template <typename E, size_t N>
std::string_view enum_name(const EnumNames<E, N>& names, E value) {
    for (const auto& [e, name] : names)
        if (e == value) return name;
    KASCADE_ASSERT(false && "enum value without a name");
    return "?";
}

template <typename E, size_t N>
std::optional<E> enum_value(const EnumNames<E, N>& names, std::string_view name) {
    for (const auto& [e, n] : names)
        if (n == name) return e;
    return std::nullopt;
}

template <typename E, size_t N>
std::vector<std::string> all_enum_names(const EnumNames<E, N>& names) {
    std::vector<std::string> out;
    for (const auto& [e, n] : names) out.emplace_back(n);
    return out;
}

template <typename E, size_t N>
E parse_enum_name(const EnumNames<E, N>& names, std::string_view name, std::string_view option) {
    if (const std::optional<E> e = enum_value(names, name)) return *e;
    const std::vector<std::string> choices = all_enum_names(names);
    const std::string suggestion = closest_match(name, choices);
    KASCADE_FAIL("invalid {}='{}' (expected {}){}", option, name, fmt::join(choices, ", "),
                 suggestion.empty() ? "" : fmt::format("; did you mean {}?", suggestion));
}

}  // namespace kascade
