// base/closest_match.cpp: edit distance and the closest candidate.
#include "base/closest_match.h"

#include <algorithm>
#include <cctype>

namespace kascade {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

std::string closest_match(std::string_view name, const std::vector<std::string>& candidates) {
    auto lower = [](std::string_view s) {
        std::string out(s);
        for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return out;
    };
    const std::string key = lower(name);
    std::string best;
    std::size_t best_distance = name.size() / 3 + 2;  // more edits than this is another word, not a typo
    for (const std::string& candidate : candidates) {
        const std::size_t d = edit_distance(key, lower(candidate));
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

}  // namespace kascade
