// tests/cli/test_hardening_messages.cpp: every error is one line "kascade: error: ..." naming the option or file the
// user gave, with exit code 1, or 2 for a mistake in the command line itself (issue 25, class 7): no integer
// overflow past a check, no raw CLI11 or std::filesystem message (their exit codes 104-114, a 300-digit range,
// "Run with --help"), no internal name (a partial file <name>.partial-<host>-<pid>, an option the command lacks).
#include <gtest/gtest.h>

#include <regex>

#include "pipeline/sweep_fixture.h"

namespace {

struct MessageCase {
    std::string args;
    int exit_code;                        ///< 1: an error; 2: the command line itself is wrong
    std::vector<std::string> contains;    ///< what the line must say
    std::vector<std::string> never = {};  ///< what it must not say (names this command does not have)
};

TEST(ErrorMessages, EveryErrorIsOneLineInKascadesFormNamingWhatTheUserGave) {
    TempDir dir("messages");
    const std::string bin = shell_quote(kStoriesBin), text = shell_quote(kStoriesText);
    const std::string config = shell_quote(kShared / "models/stories260K-hf/config.json");
    const fs::path a_file = dir.write("a-file.txt", "text\n");
    const std::string long_name(300, 'a');  // longer than a file name may be
    const std::string generate = "generate --model " + bin + " ";
    const std::string capture = "capture --model " + bin + " --text " + text + " --results " + shell_quote(dir / "r");
    std::string decode_toml = tiny_sweep_toml();
    decode_toml.insert(decode_toml.find("[test]\n") + 7, "phase = \"decode\"\ndecode_tokens = 4294967297\n");
    const fs::path decode_sweep = dir.write("decode.toml", decode_toml);

    const std::vector<MessageCase> cases = {
        // Integers: -n as large as an int goes, and larger, never wraps around past the context check; a sweep
        // file's integer beyond an int is refused, not cut to its low bits (4294967297 would run as 1).
        {generate + "-n 2147483647", 1, {"-n 2147483647", "exceeds the model's context of 512"}},
        {generate + "-n 99999999999", 2, {"-n 99999999999 is out of range (must be in [1, 2147483647])"}},
        {"sweep --dry-run " + shell_quote(decode_sweep) + " --results " + shell_quote(dir / "r"),
         1,
         {decode_sweep.string() + ": test.decode_tokens = 4294967297 is out of range (must be at most 2147483647)"}},
        {capture + " --ctx 99999999999",
         2,
         {"--ctx 99999999999 is not a value it takes (expected a whole number", "capture --help"}},
        // Ranges in words, not CLI11's 300-digit ones.
        {"sweep x.toml --job-index -1", 2, {"--job-index -1 is out of range (must be in [0, 2147483647])"}},
        {"sweep x.toml --jobs 0", 2, {"--jobs 0 is out of range (must be in [1, 1024])"}},
        {"random-model --config " + config + " --out " + shell_quote(dir / "m") + " --layers 0",
         2,
         {"--layers 0 is out of range"}},
        // CLI11's own findings, in the same form.
        {"capture --model " + bin, 2, {"--text is required", "(kascade capture --help)"}},
        {capture + " --bogus", 2, {"--bogus"}},
        {"frobnicate", 2, {"unknown command 'frobnicate'"}},
        {"eval --model " + bin + " --text " + text, 2, {"eval needs --schedule ID or --method NAME"}},
        // generate names its own options, not eval's.
        {generate + "--method oracle --topk-tiles 2 -n 10",
         1,
         {"tile=16", "prompt + -n=11"},
         {"prompt-tokens", "decode-tokens"}},
        // File system failures name the file as the user gave it, never a partial file.
        {"random-model --config " + config + " --out /proc/self", 1, {"\"/proc/self/model.safetensors\""}},
        {"random-model --config " + config + " --out " + shell_quote(a_file / "sub"),
         1,
         {"cannot create folder \"" + (a_file / "sub").string() + "\""}},
        {"status --results " + shell_quote(dir / long_name), 1, {long_name, "File name too long"}},
    };
    const std::regex long_number("[0-9]{20}");
    for (const MessageCase& c : cases) {
        SCOPED_TRACE(c.args);
        const CommandResult r = run_kascade(c.args);
        EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
        EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
        for (const std::string& s : c.contains) EXPECT_NE(r.err.find(s), std::string::npos) << s << " in " << r.err;
        for (const std::string& s : c.never) EXPECT_EQ(r.err.find(s), std::string::npos) << s << " in " << r.err;
        for (const char* internal : {".partial-", "filesystem error", "Run with --help", "std::", "Could not convert"})
            EXPECT_EQ(r.err.find(internal), std::string::npos) << internal << " in " << r.err;
        EXPECT_FALSE(std::regex_search(r.err, long_number)) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "m"));
}

}  // namespace
