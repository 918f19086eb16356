// base/error.h: the two error tiers of kascade, the bottom layer every other one (kernels, io, pipeline) includes.
//
//  - KASCADE_CHECK(cond, fmt, args...): bad *user input* (a file, a flag, a config value). Throws kascade::Error with
//    a message that names the file or field, the value found and what was expected. main() prints it as
//    "kascade: error: <message>" and exits 1.
//  - KASCADE_ASSERT(cond): a *bug* (an invariant the code itself must keep, e.g. a kernel's precondition: the
//    runtime validates user input before it reaches a kernel). Prints the expression and location and aborts;
//    user input must never be able to reach it. Aborting, not throwing, also keeps it safe inside OpenMP regions,
//    which exceptions must not leave.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace kascade {

/// An error caused by input the user gave us; its message is meant to be read by that user.
class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void assert_fail(const char* expression, const char* file, int line);

}  // namespace kascade

#define KASCADE_CHECK(cond, ...)                                       \
    do {                                                               \
        if (!(cond)) throw ::kascade::Error(fmt::format(__VA_ARGS__)); \
    } while (0)

#define KASCADE_FAIL(...) throw ::kascade::Error(fmt::format(__VA_ARGS__))

#define KASCADE_ASSERT(cond)                                            \
    do {                                                                \
        if (!(cond)) ::kascade::assert_fail(#cond, __FILE__, __LINE__); \
    } while (0)
