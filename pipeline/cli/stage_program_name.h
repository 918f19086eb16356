// pipeline/cli/stage_program_name.h: `kascade-capture ARGS` runs `kascade capture ARGS` (busybox style).
#pragma once

#include <string>
#include <vector>

namespace kascade::cli {

/// The command line to parse for a program started as `args` (args[0] its name as started): unchanged for
/// `kascade` itself and for any name not of the form kascade-<x>; for kascade-<command> (a stage executable),
/// `kascade <command> ARGS`, with args[0] the `kascade` beside it, so usage lines and help read exactly as they do
/// for `kascade <command>`.
///
/// Why: a job script or a Makefile can call one stage by its own name, and the build installs the stage
/// executables as links to this one binary (pipeline/CMakeLists.txt) instead of linking one program per stage.
/// Throws UsageError, naming the program and the stage executables there are, for kascade-<x> where x is not one
/// of `commands` (the subcommands registered on the root app).
std::vector<std::string> stage_program_arguments(std::vector<std::string> args,
                                                 const std::vector<std::string>& commands);

}  // namespace kascade::cli
