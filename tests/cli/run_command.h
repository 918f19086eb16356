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

/// Runs `kascade <args>` (args already shell-quoted where needed) with stdin closed.
inline CommandResult run_kascade(const std::string& args) {
    static int counter = 0;
    const std::filesystem::path err_path =
        std::filesystem::temp_directory_path() /
        ("kascade_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    const std::string command = shell_quote(KASCADE_BIN) + " " + args + " </dev/null 2>" + err_path.string();
    CommandResult result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream err(err_path);
    std::stringstream ss;
    ss << err.rdbuf();
    result.err = ss.str();
    std::filesystem::remove(err_path);
    return result;
}
