// kascade: the command-line front end. Each subcommand lives in its own cli/<name>_command.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "build_info.h"
#include "io/closest_match.h"
#include "pipeline/cli/commands.h"

namespace {

/// CLI11 reports a mistyped subcommand as "A subcommand is required"; name it instead, with the closest command.
void reject_unknown_command(const CLI::App& app, int argc, char** argv) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
    }
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--results") {  // the one root option that takes a value
            ++i;
            continue;
        }
        if (arg.starts_with("-")) continue;
        if (std::find(names.begin(), names.end(), arg) != names.end()) return;
        const std::string suggestion = kascade::closest_match(arg, names);
        KASCADE_FAIL("unknown command '{}'{}; commands are: {} (kascade --help)", arg,
                     suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion),
                     fmt::join(names, ", "));
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kascade: how much of a language model's attention can Kascade sparse attention skip?"};
    app.set_version_flag("--version", std::string("kascade ") + KASCADE_VERSION + " (" + KASCADE_GIT_COMMIT + ")");
    app.require_subcommand(1);
    kascade::cli::register_tokenize_command(app);
    kascade::cli::register_perplexity_command(app);
    kascade::cli::register_random_model_command(app);
    static kascade::cli::CommonOptions common;
    app.add_option("--results", common.results_dir, "results folder: kascade.db and artifacts/")->capture_default_str();
    app.fallthrough();
    kascade::cli::register_generate_command(app, common);
    kascade::cli::register_capture_command(app, common);
    kascade::cli::register_similarity_command(app, common);
    kascade::cli::register_schedule_command(app, common);
    kascade::cli::register_eval_command(app, common);
    kascade::cli::register_task_command(app, common);
    kascade::cli::register_sweep_command(app, common);
    kascade::cli::register_query_command(app, common);
    kascade::cli::register_status_command(app, common);
    kascade::cli::register_merge_command(app, common);
    kascade::cli::register_report_command(app, common);
    try {
        reject_unknown_command(app, argc, argv);
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const kascade::Error& e) {
        std::fprintf(stderr, "kascade: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        // Library failures (filesystem, allocation) that no check anticipated: still one line and a non-zero exit.
        std::fprintf(stderr, "kascade: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
