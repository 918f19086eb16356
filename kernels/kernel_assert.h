// kernels/kernel_assert.h: precondition checks for the numeric kernels. A failed check is a bug in the caller (the
// runtime validates user input before it reaches a kernel), so it prints the expression and location and aborts.
// Kernels do not depend on io/, hence this small twin of KASCADE_ASSERT; aborting (not throwing) also keeps the
// check safe inside OpenMP regions, which exceptions must not leave.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace kascade::detail {

[[noreturn]] inline void kernel_assert_fail(const char* expression, const char* file, int line) {
    std::fprintf(stderr, "kascade: kernel precondition failed: %s (%s:%d)\n", expression, file, line);
    std::abort();
}

}  // namespace kascade::detail

#define KASCADE_KERNEL_ASSERT(cond)                                                    \
    do {                                                                               \
        if (!(cond)) ::kascade::detail::kernel_assert_fail(#cond, __FILE__, __LINE__); \
    } while (0)
