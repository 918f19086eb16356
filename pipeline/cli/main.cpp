// kascade: the command-line front end. Each subcommand lives in its own cli/<name>_command.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/closest_match.h"
#include "base/error.h"
#include "build_info.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/stage_program_name.h"

namespace {

/// The subcommands registered on the root app, in registration order.
std::vector<std::string> command_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names.push_back(sub->get_name());
    }
    return names;
}

/// CLI11 reports a mistyped subcommand as "A subcommand is required"; name it instead, with the closest command.
void reject_unknown_command(const CLI::App& app, const std::vector<std::string>& args) {
    const std::vector<std::string> names = command_names(app);
    for (size_t i = 1; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg == "--results") {  // the one root option that takes a value
            ++i;
            continue;
        }
        if (arg.starts_with("-")) continue;
        if (std::find(names.begin(), names.end(), arg) != names.end()) return;
        const std::string suggestion = kascade::closest_match(arg, names);
        throw kascade::cli::UsageError(fmt::format(
            "unknown command '{}'{}; commands are: {} (kascade --help)", arg,
            suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion), fmt::join(names, ", ")));
    }
}

/// The command whose options were being parsed.
const CLI::App& innermost_command(const CLI::App& app) {
    const CLI::App* sub = &app;
    while (!sub->get_subcommands().empty()) sub = sub->get_subcommands().back();
    return *sub;
}

/// "kascade capture": that command, for the --help hint of a usage error.
std::string command_path(const CLI::App& app) {
    std::string path = "kascade";
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
        sub = sub->get_subcommands().back();
        path += " " + sub->get_name();
    }
    return path;
}

/// A command-line mistake CLI11 found, in kascade's words: "Could not convert: --ctx = 1e99" names the option, the
/// value the user gave and what the option takes instead; no parser-internal range or exit code is shown.
std::string usage_message(const CLI::App& app, const CLI::ParseError& e) {
    const std::string message = e.what();
    constexpr std::string_view kConvert = "Could not convert: ";
    if (!message.starts_with(kConvert)) return message;
    const std::string rest = message.substr(kConvert.size());
    const size_t eq = rest.find(" = ");
    if (eq == std::string::npos) return message;
    const std::string option = rest.substr(0, eq);
    const CLI::Option* found = innermost_command(app).get_option_no_throw(option);
    const std::string type = found != nullptr ? found->get_type_name() : "";
    const char* expected = type.starts_with("UINT")  ? "a whole number >= 0 of sensible size"
                           : type.starts_with("INT") ? "a whole number of sensible size"
                           : type == "FLOAT"         ? "a number"
                                                     : "a value of its kind";
    return fmt::format("{} {} is not a value it takes (expected {})", option, rest.substr(eq + 3), expected);
}

/// A std::filesystem failure no check anticipated, as "cannot create directories \"x\": Not a directory" rather
/// than the library's "filesystem error: ... [x]". The path shown is the one the user knows: a partial file or
/// folder (<name>.partial-<host>-<pid>) is named by its final name.
std::string filesystem_message(const std::filesystem::filesystem_error& e) {
    auto shown = [](const std::filesystem::path& p) {
        std::string s = p.string();
        for (size_t at = s.find(".partial-"); at != std::string::npos; at = s.find(".partial-", at))
            s.erase(at, s.find('/', at) == std::string::npos ? std::string::npos : s.find('/', at) - at);
        return "\"" + s + "\"";
    };
    std::string what = e.what();
    constexpr std::string_view kPrefix = "filesystem error: ";
    if (what.starts_with(kPrefix)) what.erase(0, kPrefix.size());
    const std::string reason = e.code().message();
    if (const size_t at = what.find(": " + reason); at != std::string::npos) what.erase(at);
    if (!what.starts_with("cannot ")) what = "cannot access";  // "status", "directory iterator ...": internal words
    std::string paths;
    if (!e.path1().empty()) paths += " " + shown(e.path1());
    if (!e.path2().empty()) paths += " to " + shown(e.path2());
    return fmt::format("{}{}: {}", what, paths, reason);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"kascade: how much of a language model's attention can Kascade sparse attention skip?"};
    app.set_version_flag("--version", std::string("kascade ") + KASCADE_VERSION + " (" + KASCADE_GIT_COMMIT + ")");
    app.require_subcommand(1);
    kascade::cli::register_tokenize_command(app);
    kascade::cli::register_chat_command(app);
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
        // Started as kascade-<command> (a stage executable, a link to this binary): run `kascade <command>`.
        std::vector<std::string> args = kascade::cli::stage_program_arguments({argv, argv + argc}, command_names(app));
        reject_unknown_command(app, args);
        std::vector<char*> parsed_argv;
        for (std::string& arg : args) parsed_argv.push_back(arg.data());
        app.parse(static_cast<int>(parsed_argv.size()), parsed_argv.data());
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        // Usage errors: the one error form too, exit code 2 (CLI11's own codes, 100-120, mean nothing to a user).
        std::fprintf(stderr, "kascade: error: %s (%s --help)\n", usage_message(app, e).c_str(),
                     command_path(app).c_str());
        return 2;
    } catch (const kascade::cli::UsageError& e) {
        std::fprintf(stderr, "kascade: error: %s\n", e.what());
        return 2;
    } catch (const kascade::Error& e) {
        std::fprintf(stderr, "kascade: error: %s\n", e.what());
        return 1;
    } catch (const std::filesystem::filesystem_error& e) {
        std::fprintf(stderr, "kascade: error: %s\n", filesystem_message(e).c_str());
        return 1;
    } catch (const std::exception& e) {
        // Library failures (filesystem, allocation) that no check anticipated: still one line and a non-zero exit.
        std::fprintf(stderr, "kascade: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
