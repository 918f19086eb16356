// tests/cli/test_hardening_special_files.cpp: every path kascade reads refuses what is not a regular file (issue 25,
// class 4). A FIFO blocks its reader until a writer comes and a character device (/dev/zero) never ends: given as a
// text, a model, a tokenizer, a config, a prompt, a haystack, a sweep file or a results database, kascade must stop
// at once with one line naming the file, not hang or grow its memory. Each command runs under a time limit, so
// that a command that would read forever fails the test instead of hanging it.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <fmt/format.h>

#include "pipeline/sweep_fixture.h"

namespace {

/// Runs `kascade <args>`, killed after `seconds`: exit code 137 then.
CommandResult run_kascade_limited(const std::string& args, const fs::path& err_file, int seconds = 20) {
    const std::string command = "timeout -s KILL " + std::to_string(seconds) + " " + shell_quote(KASCADE_BIN) + " " +
                                args + " </dev/null 2>" + shell_quote(err_file);
    return run_shell(command, err_file);
}

struct SpecialFileCase {
    std::string name;
    std::string args;  ///< the command line; the file under test is `path`
    fs::path path;     ///< what the error must name
    std::string kind;  ///< "FIFO" or "character device"; empty: refused otherwise (merge: "not a results folder")
};

TEST(SpecialFiles, EveryReadPathRefusesFifosAndDevicesAtOnce) {
    TempDir dir("special-files");
    auto fifo = [&](const fs::path& path) {
        fs::create_directories(path.parent_path());
        EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
        return path;
    };
    const fs::path zero = "/dev/zero";
    const std::string bin = shell_quote(kStoriesBin), tok = shell_quote(kStoriesTok), text = shell_quote(kStoriesText);

    // A Hugging Face folder whose config.json is a FIFO; a results folder and a shard whose kascade.db is one.
    const fs::path hf = dir / "hf";
    fs::create_directories(hf);
    fs::copy_file(kShared / "models/stories260K-hf/model.safetensors", hf / "model.safetensors");
    fifo(hf / "config.json");
    const fs::path db_fifo = fifo(dir / "results-fifo" / "kascade.db");
    // A sweep file whose text is a FIFO.
    const fs::path text_fifo = fifo(dir / "text.fifo");
    std::string toml = tiny_sweep_toml();
    toml.replace(toml.find(kStoriesText.string()), kStoriesText.string().size(), text_fifo.string());
    write_text(dir / "fifo-text.toml", toml);
    const std::string results = " --results " + shell_quote(dir / "results");
    const std::string task = "task --model " + bin + " --task passkey --lengths 128 --method dense" + results;

    const std::vector<SpecialFileCase> cases = {
        {"tokenize --tokenizer FIFO", "tokenize --string hi --tokenizer " + shell_quote(fifo(dir / "tok.bin")),
         dir / "tok.bin", "FIFO"},
        {"tokenize --text FIFO", "tokenize --tokenizer " + tok + " --text " + shell_quote(text_fifo), text_fifo,
         "FIFO"},
        {"tokenize --text /dev/zero", "tokenize --tokenizer " + tok + " --text /dev/zero", zero, "character device"},
        {"perplexity --text /dev/zero", "perplexity --model " + bin + " --text /dev/zero", zero, "character device"},
        {"generate --model FIFO", "generate -n 2 --tokenizer " + tok + " --model " + shell_quote(fifo(dir / "m.bin")),
         dir / "m.bin", "FIFO"},
        {"generate --model HF folder, config.json a FIFO",
         "generate -n 2 --tokenizer " + tok + " --model " + shell_quote(hf), hf / "config.json", "FIFO"},
        {"generate --prompt-file FIFO", "generate -n 2 --model " + bin + " --prompt-file " + shell_quote(text_fifo),
         text_fifo, "FIFO"},
        {"random-model --config FIFO",
         "random-model --out " + shell_quote(dir / "out") + " --config " + shell_quote(fifo(dir / "config.json")),
         dir / "config.json", "FIFO"},
        {"sweep FIFO", "sweep --dry-run " + shell_quote(fifo(dir / "sweep.toml")) + results, dir / "sweep.toml",
         "FIFO"},
        {"sweep file with text.path a FIFO", "sweep --dry-run " + shell_quote(dir / "fifo-text.toml") + results,
         text_fifo, "FIFO"},
        {"capture --text /dev/zero", "capture --model " + bin + " --text /dev/zero" + results, zero,
         "character device"},
        {"task --haystack FIFO", task + " --haystack " + shell_quote(text_fifo), text_fifo, "FIFO"},
        {"status, kascade.db a FIFO", "status --results " + shell_quote(db_fifo.parent_path()), db_fifo, "FIFO"},
        {"merge, a shard's kascade.db a FIFO",
         "merge " + shell_quote(db_fifo.parent_path()) + " --into " + shell_quote(dir / "merged"),
         db_fifo.parent_path(), ""},
    };
    for (const SpecialFileCase& c : cases) {
        SCOPED_TRACE(c.name);
        const CommandResult r = run_kascade_limited(c.args, dir / "err.txt");
        EXPECT_EQ(r.exit_code, 1) << "137: killed, still reading\n" << r.err;
        EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        const std::string quoted = fmt::format("\"{}\"", c.path.string());
        EXPECT_NE(r.err.find(quoted), std::string::npos) << r.err;
        if (c.kind.empty()) continue;
        EXPECT_NE(r.err.find("it is a " + c.kind), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("expected a regular file"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "out"));
    EXPECT_FALSE(fs::exists(dir / "merged" / "kascade.db"));
}

}  // namespace
