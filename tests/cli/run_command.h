// tests/cli/run_command.h: runs the built `kascade` executable the way a user does and captures what it prints.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/temp_dir.h"

using kascade::test::TempDir;

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

/// Quotes one argument for /bin/sh.
inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

/// The whole of a file (a command's output file, a user file it must leave alone); "" if it cannot be read.
inline std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs the /bin/sh command line `command`, which sends its stderr to `err_file`: stdout is captured, then the
/// file is read into err. The exit code is 128 + the signal's number for a command killed by a signal, as sh says.
inline CommandResult run_shell(const std::string& command, const std::filesystem::path& err_file) {
    CommandResult result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream err(err_file);
    std::stringstream ss;
    ss << err.rdbuf();
    result.err = ss.str();
    return result;
}

/// Runs `kascade <args>` (args already shell-quoted where needed) with stdin closed.
inline CommandResult run_kascade(const std::string& args) {
    static int counter = 0;
    const std::filesystem::path err_path =
        std::filesystem::temp_directory_path() /
        ("kascade_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    CommandResult result =
        run_shell(shell_quote(KASCADE_BIN) + " " + args + " </dev/null 2>" + shell_quote(err_path), err_path);
    std::filesystem::remove(err_path);
    return result;
}

/// Starts `sh -c command` in the background (for commands that must run at the same time) and returns its pid.
inline pid_t start_shell(const std::string& command) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
        ::_exit(127);
    }
    return pid;
}

/// Waits for a start_shell command: its exit code, or 128 + the signal's number.
inline int wait_exit_code(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
