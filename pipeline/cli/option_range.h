// pipeline/cli/option_range.h: the one range check of numeric command-line options, run while parsing, so that
// no stage sees a negative offset, a zero tile or a NaN, and the message names the option as the user typed it.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "pipeline/cli/commands.h"
#include "pipeline/stages/param_ranges.h"

namespace kascade::cli {

/// Refuses, while parsing, a value of `option` that is not a number in `range`: "--ctx 0 is out of range (must be
/// >= 2)". Throws UsageError, so the usual one-line error follows (exit code 2). The ranges of stage parameters are
/// those of pipeline/stages/param_ranges.h, which the sweep file reader checks too. `shown` names the option in
/// messages (default: its long name).
inline CLI::Option* check_range(CLI::Option* option, const ValueRange& range, const std::string& shown = "") {
    const std::string name = shown.empty() ? option->get_name() : shown;
    option->each([name, range](const std::string& text) {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        KASCADE_USAGE_CHECK(!text.empty() && end == text.c_str() + text.size() && errno != ERANGE,
                            "{} {} is not a number (must be {})", name, text, range.text());
        KASCADE_USAGE_CHECK(range.contains(value), "{} {} is out of range (must be {})", name, text, range.text());
    });
    return option;
}

/// The same for [min, max] (or (min, max] with min_open), for options that are not stage parameters.
inline CLI::Option* check_range(CLI::Option* option, double min, double max = std::numeric_limits<double>::infinity(),
                                bool min_open = false) {
    return check_range(option, ValueRange{min, max, min_open});
}

}  // namespace kascade::cli
