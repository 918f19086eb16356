// pipeline/cli/commands.h: every subcommand registers itself on the root CLI11 app; one file per subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace kascade::cli {

void register_tokenize_command(CLI::App& app);
void register_generate_command(CLI::App& app);
void register_perplexity_command(CLI::App& app);

}  // namespace kascade::cli
