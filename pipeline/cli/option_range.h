// pipeline/cli/option_range.h: the one range check of numeric command-line options, run while parsing, so that
// no stage sees a negative offset, a zero tile or a NaN, and the message names the option as the user typed it.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/error.h"
#include "pipeline/stages/param_ranges.h"

namespace kascade::cli {

/// Refuses, while parsing, a value of `option` that is not a number in `range`: "--ctx 0 is out of range (must be
/// >= 2)". Throws kascade::Error, so the usual one-line error follows. The ranges of stage parameters are those of
/// pipeline/stages/param_ranges.h, which the sweep file reader checks too.
inline CLI::Option* check_range(CLI::Option* option, const ValueRange& range) {
    const std::string name = option->get_name();
    option->each([name, range](const std::string& text) {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        KASCADE_CHECK(!text.empty() && end == text.c_str() + text.size() && errno != ERANGE,
                      "{} {} is not a number (must be {})", name, text, range.text());
        KASCADE_CHECK(range.contains(value), "{} {} is out of range (must be {})", name, text, range.text());
    });
    return option;
}

/// The same for [min, max] (or (min, max] with min_open), for options that are not stage parameters.
inline CLI::Option* check_range(CLI::Option* option, double min, double max = std::numeric_limits<double>::infinity(),
                                bool min_open = false) {
    return check_range(option, ValueRange{min, max, min_open});
}

}  // namespace kascade::cli
