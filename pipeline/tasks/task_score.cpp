// pipeline/tasks/task_score.cpp: number match and RULER's string matches.
#include "pipeline/tasks/task_score.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace kascade {

namespace {

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

/// The first maximal run of ASCII digits in s ("" if none).
std::string_view first_integer(std::string_view s) {
    const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    const auto begin = std::find_if(s.begin(), s.end(), is_digit);
    const auto end = std::find_if_not(begin, s.end(), is_digit);
    return s.substr(begin - s.begin(), end - begin);
}

}  // namespace

double score_task_output(TaskMetric metric, std::string_view output, const std::vector<std::string>& expected) {
    KASCADE_ASSERT(!expected.empty());
    switch (metric) {
        case TaskMetric::NumberMatch:
            return first_integer(output) == expected.front() ? 1.0 : 0.0;
        case TaskMetric::StringMatchAll:
        case TaskMetric::StringMatchPart: {
            const std::string out = ascii_lower(output);
            int found = 0;
            for (const std::string& e : expected) found += out.find(ascii_lower(e)) != std::string::npos;
            if (metric == TaskMetric::StringMatchPart) return found > 0 ? 1.0 : 0.0;
            return static_cast<double>(found) / static_cast<double>(expected.size());
        }
    }
    KASCADE_ASSERT(false && "unknown task metric");
    return 0;
}

}  // namespace kascade
