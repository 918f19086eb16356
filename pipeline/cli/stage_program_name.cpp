// pipeline/cli/stage_program_name.cpp: the stage executables (kascade-<command>) as one binary.
#include "pipeline/cli/stage_program_name.h"

#include <algorithm>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipeline/cli/commands.h"

namespace kascade::cli {

std::vector<std::string> stage_program_arguments(std::vector<std::string> args,
                                                 const std::vector<std::string>& commands) {
    constexpr std::string_view kPrefix = "kascade-";
    if (args.empty()) return args;
    const std::filesystem::path started(args[0]);
    const std::string program = started.filename().string();
    if (!program.starts_with(kPrefix)) return args;
    const std::string command = program.substr(kPrefix.size());
    if (std::find(commands.begin(), commands.end(), command) == commands.end()) {
        std::vector<std::string> stages;
        for (const std::string& name : commands) stages.push_back(std::string(kPrefix) + name);
        throw UsageError(
            fmt::format("'{}' is not a kascade stage executable: the program name must be kascade-<command>, one of {} "
                        "(or run kascade <command>; kascade --help)",
                        program, fmt::join(stages, ", ")));
    }
    args[0] = (started.parent_path() / "kascade").string();
    args.insert(args.begin() + 1, command);
    return args;
}

}  // namespace kascade::cli
