// tests/common/error_of.h: the message a refusal gives, for tests that check what a bad input is told.
#pragma once

#include <functional>
#include <string>

#include "base/error.h"

namespace kascade::test {

/// The message of the kascade::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace kascade::test
