// tests/common/json_output.h: read what a command printed with --json, so a test names the field it wants instead of
// cutting the human-readable line at fixed character offsets.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/run_command.h"

/// The JSON object a command printed on stdout (its --json output); a test failure, and an empty object, when the
/// command failed or printed something else.
inline nlohmann::json json_of(const CommandResult& r) {
    if (r.exit_code != 0) {
        ADD_FAILURE() << "the command failed (" << r.exit_code << "): " << r.err;
        return nlohmann::json::object();
    }
    nlohmann::json out = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    if (!out.is_object()) {
        ADD_FAILURE() << "not one JSON object: " << r.out;
        return nlohmann::json::object();
    }
    return out;
}

/// A string field of a command's --json output ("" when it is missing, which fails the test).
inline std::string json_string(const CommandResult& r, const std::string& field) {
    const nlohmann::json out = json_of(r);
    if (!out.contains(field)) {
        ADD_FAILURE() << "no field \"" << field << "\" in " << r.out;
        return "";
    }
    return out[field].is_string() ? out[field].get<std::string>() : out[field].dump();
}
