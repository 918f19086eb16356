// tests/cli/test_stage_executables.cpp: the stage executables. `cmake --install` puts kascade-<command> beside
// kascade for every subcommand `kascade --help` lists (and no other), found on the PATH; each runs exactly
// `kascade <command>`: the same help, the same usage errors, the same results of a real stage on a real model. A
// kascade-<x> that names no command stops with one line naming the program and the stage executables there are.
// Real installs (into a fresh prefix) and real kascade processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/shared_files.h"
#include "run_command.h"

namespace fs = std::filesystem;

namespace {

using kascade::test::kStoriesBin;
using kascade::test::kStoriesText;
using kascade::test::kStoriesTok;
/// The build folder: KASCADE_BIN is <build>/pipeline/kascade.
const fs::path kBuildDir = fs::path(KASCADE_BIN).parent_path().parent_path();

/// Runs the /bin/sh command line `command` with stdin closed; stdout and stderr captured apart.
CommandResult run(const std::string& command, const TempDir& dir) {
    const fs::path err = dir / "stderr.txt";
    CommandResult result = run_shell("{ " + command + "; } </dev/null 2>" + shell_quote(err), err);
    fs::remove(err);
    return result;
}

/// Runs `program args` with PATH set to `bin` alone, as a job script whose PATH holds the installed bin folder.
CommandResult run_on_path(const fs::path& bin, const std::string& program, const std::string& args,
                          const TempDir& dir) {
    return run("PATH=" + shell_quote(bin) + "; export PATH; " + program + " " + args, dir);
}

/// The cmake that configured the build folder (CMAKE_COMMAND in its cache), else the one on the PATH.
std::string cmake_command() {
    std::ifstream cache(kBuildDir / "CMakeCache.txt");
    std::string line;
    constexpr std::string_view kKey = "CMAKE_COMMAND:INTERNAL=";
    while (std::getline(cache, line)) {
        if (line.starts_with(kKey)) return line.substr(kKey.size());
    }
    return "cmake";
}

/// `cmake --install <build> --prefix <prefix>`; the bin folder it installed into.
fs::path install_into(const fs::path& prefix, const TempDir& dir) {
    EXPECT_TRUE(fs::exists(kBuildDir / "CMakeCache.txt")) << kBuildDir << " is not the build folder of " << KASCADE_BIN;
    const CommandResult r =
        run(shell_quote(cmake_command()) + " --install " + shell_quote(kBuildDir) + " --prefix " + shell_quote(prefix),
            dir);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return prefix / "bin";
}

/// The subcommands `kascade --help` lists, in order.
std::vector<std::string> listed_commands() {
    const CommandResult r = run_kascade("--help");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> names;
    std::istringstream lines(r.out);
    std::string line;
    bool in_list = false;
    while (std::getline(lines, line)) {
        if (line == "Subcommands:") {
            in_list = true;
        } else if (in_list && line.starts_with("  ") && line.size() > 2 && line[2] != ' ') {
            names.push_back(line.substr(2, line.find(' ', 2) - 2));
        } else if (in_list && !line.empty()) {
            break;
        }
    }
    return names;
}

/// The kascade-* entries of a bin folder, by name.
std::set<std::string> stage_entries(const fs::path& bin) {
    std::set<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(bin)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with("kascade-")) names.insert(name);
    }
    return names;
}

TEST(StageExecutables, InstalledCaptureOnThePathPrintsTheCaptureCommandsHelp) {
    TempDir dir("stage-help");
    const fs::path bin = install_into(dir / "prefix", dir);
    ASSERT_TRUE(fs::is_regular_file(bin / "kascade"));

    const CommandResult found = run_on_path(bin, "command -v", "kascade-capture", dir);
    EXPECT_EQ(found.out, (bin / "kascade-capture").string() + "\n");

    const CommandResult stage = run_on_path(bin, "kascade-capture", "--help", dir);
    const CommandResult command = run_on_path(bin, "kascade", "capture --help", dir);
    EXPECT_EQ(stage.exit_code, 0) << stage.err;
    EXPECT_EQ(command.exit_code, 0) << command.err;
    EXPECT_NE(stage.out.find("Stage 1: record each layer's pooled attention"), std::string::npos) << stage.out;
    EXPECT_NE(stage.out.find("Usage: kascade capture [OPTIONS]"), std::string::npos) << stage.out;
    EXPECT_EQ(stage.out, command.out);
    EXPECT_EQ(stage.err, "");
}

TEST(StageExecutables, EveryCommandHasItsExecutableInstalledAndNoOtherIs) {
    const std::vector<std::string> commands = listed_commands();
    ASSERT_GE(commands.size(), 10u);  // tokenize ... report: the parse found the list
    for (const char* stage : {"capture", "similarity", "schedule", "eval", "sweep", "query"}) {
        EXPECT_NE(std::find(commands.begin(), commands.end(), stage), commands.end()) << stage;
    }
    std::set<std::string> expected;
    for (const std::string& name : commands) expected.insert("kascade-" + name);

    TempDir dir("stage-all");
    const fs::path bin = install_into(dir / "prefix", dir);
    // Installed, and in the build tree beside the built kascade.
    for (const fs::path& folder : {bin, fs::path(KASCADE_BIN).parent_path()}) {
        EXPECT_EQ(stage_entries(folder), expected) << folder;
        for (const std::string& name : expected) {
            EXPECT_TRUE(fs::equivalent(folder / name, folder / "kascade")) << folder / name;
        }
    }
    // Each one is its command: the same help.
    for (const std::string& name : commands) {
        const CommandResult stage = run_on_path(bin, "kascade-" + name, "--help", dir);
        const CommandResult command = run_on_path(bin, "kascade", name + " --help", dir);
        EXPECT_EQ(stage.exit_code, 0) << name << ": " << stage.err;
        EXPECT_EQ(stage.out, command.out) << name;
        EXPECT_NE(stage.out.find("Usage: kascade " + name), std::string::npos) << stage.out;
    }
}

TEST(StageExecutables, InstalledStageRunsOnARealModelAsItsCommandDoes) {
    TempDir dir("stage-real");
    const fs::path bin = install_into(dir / "prefix", dir);

    const std::string tokenize =
        "--tokenizer " + shell_quote(kStoriesTok) + " --string " + shell_quote("Once upon a time, a little dog");
    const CommandResult stage_tokens = run_on_path(bin, "kascade-tokenize", tokenize, dir);
    const CommandResult command_tokens = run_on_path(bin, "kascade", "tokenize " + tokenize, dir);
    ASSERT_EQ(stage_tokens.exit_code, 0) << stage_tokens.err;
    EXPECT_FALSE(stage_tokens.out.empty());
    EXPECT_EQ(stage_tokens.out, command_tokens.out);

    // Stage 1 on stories260K, --results after the stage as after the command: the same capture, by content key.
    const std::string capture = " --model " + shell_quote(kStoriesBin) + " --text " + shell_quote(kStoriesText) +
                                " --calib-tokens 300 --ctx 100 --tile 16";
    const CommandResult stage =
        run_on_path(bin, "kascade-capture", "--results " + shell_quote(dir / "a") + capture, dir);
    const CommandResult command =
        run_on_path(bin, "kascade", "capture --results " + shell_quote(dir / "b") + capture, dir);
    ASSERT_EQ(stage.exit_code, 0) << stage.err;
    ASSERT_EQ(command.exit_code, 0) << command.err;
    ASSERT_TRUE(stage.out.starts_with("capture ")) << stage.out;
    const std::string key = stage.out.substr(8, 16);
    EXPECT_EQ(stage.out, command.out);  // "capture <key>"
    EXPECT_TRUE(fs::exists(dir / "a/artifacts/capture" / (key + ".h5")));
    EXPECT_FALSE(fs::exists(dir / "results"));  // --results was the stage's, not the default

    // kascade-status reads the folder kascade-capture wrote.
    const CommandResult status = run_on_path(bin, "kascade-status", "--results " + shell_quote(dir / "a"), dir);
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find(key), std::string::npos) << status.out;
}

TEST(StageExecutables, UsageErrorsAreTheCommandsOwn) {
    TempDir dir("stage-usage");
    const fs::path built = fs::path(KASCADE_BIN).parent_path();
    const CommandResult stage = run(shell_quote(built / "kascade-eval"), dir);
    const CommandResult command = run(shell_quote(built / "kascade") + " eval", dir);
    EXPECT_EQ(stage.exit_code, 2);
    EXPECT_EQ(stage.err, command.err);
    EXPECT_NE(stage.err.find("(kascade eval --help)"), std::string::npos) << stage.err;
}

TEST(StageExecutables, AProgramNameThatIsNoCommandStopsNamingItAndTheStages) {
    TempDir dir("stage-unknown");
    fs::create_symlink(fs::absolute(KASCADE_BIN), dir / "kascade-nosuch");
    const CommandResult r = run(shell_quote(dir / "kascade-nosuch") + " --help", dir);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("kascade: error: 'kascade-nosuch' is not a kascade stage executable")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& name : listed_commands()) {
        EXPECT_NE(r.err.find("kascade-" + name), std::string::npos) << name << " missing from: " << r.err;
    }

    // Any other name is kascade itself.
    fs::create_symlink(fs::absolute(KASCADE_BIN), dir / "kc");
    const CommandResult plain = run(shell_quote(dir / "kc") + " capture --help", dir);
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_NE(plain.out.find("Stage 1: record"), std::string::npos) << plain.out;
}

}  // namespace
