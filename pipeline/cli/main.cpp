// kascade: the command-line front end. Each subcommand lives in its own cli/<name>_command.cpp.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "build_info.h"
#include "io/error.h"
#include "pipeline/cli/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"kascade: how much of a language model's attention can Kascade sparse attention skip?"};
    app.set_version_flag("--version", std::string("kascade ") + KASCADE_VERSION + " (" + KASCADE_GIT_COMMIT + ")");
    app.require_subcommand(1);
    kascade::cli::register_tokenize_command(app);
    kascade::cli::register_generate_command(app);
    kascade::cli::register_perplexity_command(app);
    static kascade::cli::CommonOptions common;
    app.add_option("--results", common.results_dir, "results folder: kascade.db and artifacts/")->capture_default_str();
    app.fallthrough();
    kascade::cli::register_capture_command(app, common);
    kascade::cli::register_similarity_command(app, common);
    kascade::cli::register_schedule_command(app, common);
    kascade::cli::register_eval_command(app, common);
    kascade::cli::register_sweep_command(app, common);
    kascade::cli::register_query_command(app, common);
    kascade::cli::register_status_command(app, common);
    kascade::cli::register_merge_command(app, common);
    try {
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
