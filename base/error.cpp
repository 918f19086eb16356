// base/error.cpp: the abort of KASCADE_ASSERT (see error.h).
#include "base/error.h"

#include <cstdio>
#include <cstdlib>

namespace kascade {

void assert_fail(const char* expression, const char* file, int line) {
    std::fprintf(stderr, "kascade: internal error: assertion '%s' failed at %s:%d\n", expression, file, line);
    std::abort();
}

}  // namespace kascade
