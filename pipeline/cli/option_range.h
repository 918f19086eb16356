// pipeline/cli/option_range.h: the one range check of numeric command-line options, run while parsing, so that
// no stage sees a negative offset, a zero tile or a NaN, and the message names the option as the user typed it.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "io/error.h"

namespace kascade::cli {

/// Refuses, while parsing, a value of `option` that is not a number in [min, max] (in (min, max] with min_open):
/// "--ctx 0 is out of range (must be >= 2)". Throws kascade::Error, so the usual one-line error follows.
inline CLI::Option* check_range(CLI::Option* option, double min, double max = std::numeric_limits<double>::infinity(),
                                bool min_open = false) {
    const std::string name = option->get_name();
    const std::string range = std::isinf(max) ? fmt::format("{} {}", min_open ? ">" : ">=", min)
                              : min_open      ? fmt::format("in ({}, {}]", min, max)
                                              : fmt::format("in [{}, {}]", min, max);
    option->each([name, range, min, max, min_open](const std::string& text) {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        KASCADE_CHECK(!text.empty() && end == text.c_str() + text.size() && errno != ERANGE,
                      "{} {} is not a number (must be {})", name, text, range);
        // Written so that NaN fails: every comparison with it is false.
        const bool inside = (min_open ? value > min : value >= min) && value <= max;
        KASCADE_CHECK(inside, "{} {} is out of range (must be {})", name, text, range);
    });
    return option;
}

}  // namespace kascade::cli
