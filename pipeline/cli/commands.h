// pipeline/cli/commands.h: every subcommand registers itself on the root CLI11 app; one file per subcommand.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "base/error.h"

namespace kascade::cli {

/// A mistake in the command line itself (an option out of range, options that do not go together): printed like
/// every error, "kascade: error: ...", but main() exits with 2, as for the usage errors CLI11 finds.
class UsageError : public Error {
  public:
    explicit UsageError(const std::string& message) : Error(message) {}
};

#define KASCADE_USAGE_CHECK(cond, ...)                                           \
    do {                                                                         \
        if (!(cond)) throw ::kascade::cli::UsageError(fmt::format(__VA_ARGS__)); \
    } while (0)

/// Options shared by the experiment subcommands, set on the root app (and accepted after the subcommand name).
struct CommonOptions {
    std::string results_dir = "results";  ///< --results DIR: the SQLite database and artifacts folder
};

void register_tokenize_command(CLI::App& app);
void register_chat_command(CLI::App& app);
void register_generate_command(CLI::App& app, const CommonOptions& common);
void register_perplexity_command(CLI::App& app);
void register_random_model_command(CLI::App& app);
void register_capture_command(CLI::App& app, const CommonOptions& common);
void register_similarity_command(CLI::App& app, const CommonOptions& common);
void register_schedule_command(CLI::App& app, const CommonOptions& common);
void register_eval_command(CLI::App& app, const CommonOptions& common);
void register_task_command(CLI::App& app, const CommonOptions& common);
void register_sweep_command(CLI::App& app, const CommonOptions& common);
void register_query_command(CLI::App& app, const CommonOptions& common);
void register_status_command(CLI::App& app, const CommonOptions& common);
void register_merge_command(CLI::App& app, const CommonOptions& common);
void register_report_command(CLI::App& app, const CommonOptions& common);

}  // namespace kascade::cli
