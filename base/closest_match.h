// base/closest_match.h: the "did you mean" of every error about an unknown name (a subcommand, a sweep key, a column).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kascade {

/// Levenshtein distance between two strings (case-sensitive).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `name` if it is close enough to be a typo of it (at most a third of its length plus one
/// edit away, compared case-insensitively), else "".
std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace kascade
