// tests/pipeline/test_hardening_slurm_scripts.cpp: the Slurm batch scripts a sweep writes (issue 25, class 8). A
// value with a control character (a newline above all) would end its #SBATCH or shell line and start another, so
// every field written into a script refuses one, naming it, before anything is written; paths are quoted, for
// sbatch's own parser on #SBATCH lines ('#' starts a comment there, '%' is a file-name pattern) and for bash below.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "sweep_fixture.h"

namespace {

/// The arguments of one "#SBATCH ..." line as sbatch reads them (src/sbatch/opt.c, _get_argument): words separated
/// by blanks; single or double quotes group, a backslash escapes the next character, an unquoted '#' ends the line.
std::vector<std::string> sbatch_arguments(const std::string& line) {
    std::vector<std::string> args;
    std::string arg;
    bool in_arg = false, escape = false;
    char quote = 0;
    for (size_t i = std::string("#SBATCH").size(); i < line.size(); ++i) {
        const char c = line[i];
        if (escape) {
            arg += c;
            escape = false;
        } else if (c == '\\') {
            escape = in_arg = true;
        } else if (quote != 0) {
            if (c == quote)
                quote = 0;
            else
                arg += c;
        } else if (c == '"' || c == '\'') {
            quote = c;
            in_arg = true;
        } else if (c == '#') {
            break;
        } else if (c == ' ' || c == '\t') {
            if (in_arg) args.push_back(arg);
            arg.clear();
            in_arg = false;
        } else {
            arg += c;
            in_arg = true;
        }
    }
    if (in_arg) args.push_back(arg);
    return args;
}

TEST(SlurmScripts, ControlCharactersAreRefusedInEveryFieldAndPathsAreQuoted) {
    TempDir dir("slurm-fields");
    // A results folder whose path has a space, a '#' and a '%'.
    const fs::path results = dir / "my results #1 100%";
    const fs::path toml = dir / "tiny.toml";
    write_text(toml, tiny_sweep_toml());
    const std::string sweep = "sweep " + shell_quote(toml) + " --slurm --dry-run --results " + shell_quote(results);

    CommandResult r = run_kascade(sweep + " --partition 'my part' --sbatch-arg=" + shell_quote("--comment=a b"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    fs::path folder;
    for (const auto& e : fs::directory_iterator(results / "slurm")) folder = e.path();
    const std::string script = read_all(folder / "level-0.sbatch");
    std::map<std::string, std::vector<std::string>> sbatch;  // first argument -> all of the line's arguments
    std::istringstream lines(script);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("#SBATCH", 0) != 0) continue;
        const std::vector<std::string> args = sbatch_arguments(line);
        ASSERT_EQ(args.size(), 1u) << line;
        sbatch[args[0].substr(0, args[0].find('='))] = args;
    }
    std::string logs = (folder / "logs").string();
    for (size_t at = logs.find('%'); at != std::string::npos; at = logs.find('%', at + 2)) logs.insert(at, 1, '%');
    EXPECT_EQ(sbatch["--output"][0], "--output=" + logs + "/%A_%a.out") << script;
    EXPECT_EQ(sbatch["--partition"][0], "--partition=my part") << script;
    EXPECT_EQ(sbatch["--comment"][0], "--comment=a b") << script;
    // bash: the results folder is one word of the exec line.
    EXPECT_NE(script.find("--results " + shell_quote(fs::absolute(results).string()) + " "), std::string::npos)
        << script;
    fs::remove_all(results);

    // Each field, given a newline (or a tab), is refused before anything is written.
    write_text(dir / "slurm-table.toml", tiny_sweep_toml() + "[slurm]\ntime = \"01:00:00\\n#SBATCH --mem=1T\"\n");
    const fs::path odd_dir = dir / "line\nbreak";
    fs::create_directories(odd_dir);
    write_text(odd_dir / "tiny.toml", tiny_sweep_toml());
    std::string env_toml = tiny_sweep_toml();
    const std::string text = kStoriesText.string();
    env_toml.replace(env_toml.find(text), text.size(), "${KASCADE_TEST_ODD}/" + kStoriesText.filename().string());
    write_text(dir / "env.toml", env_toml);
    ::setenv("KASCADE_TEST_ODD", (kStoriesText.parent_path().string() + "\n").c_str(), 1);
    const std::string to = " --slurm --dry-run --results " + shell_quote(results);
    const std::vector<std::pair<std::string, std::string>> refused = {
        {sweep + " --partition " + shell_quote("cpu\n#SBATCH --exclusive"),
         "--partition ([slurm] partition) \"cpu\\n#SBATCH"},
        {sweep + " --time " + shell_quote("01:00:00\n"), "--time ([slurm] time)"},
        {sweep + " --mem " + shell_quote("4G\t"), "--mem ([slurm] mem) \"4G\\t\""},
        {sweep + " --sbatch-arg=" + shell_quote("--account=abc\nrm -rf ~"), "--sbatch-arg ([slurm] sbatch_args)"},
        {"sweep " + shell_quote(dir / "slurm-table.toml") + to,
         "--time ([slurm] time) \"01:00:00\\n#SBATCH --mem=1T\""},
        {"sweep " + shell_quote(odd_dir / "tiny.toml") + to, "the sweep file's path"},
        {"sweep " + shell_quote(toml) + " --slurm --dry-run --results " + shell_quote(odd_dir / "results"),
         "--results"},
        {sweep + " --shard-dir " + shell_quote(odd_dir / "shards"), "--shard-dir"},
        {"sweep " + shell_quote(dir / "env.toml") + to, "the value of ${KASCADE_TEST_ODD}"},
    };
    for (const auto& [args, field] : refused) {
        SCOPED_TRACE(args);
        r = run_kascade(args);
        EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
        EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find(field), std::string::npos) << field << " in " << r.err;
        EXPECT_NE(r.err.find("contains a control character"), std::string::npos) << r.err;
        EXPECT_FALSE(fs::exists(results / "slurm")) << "a script was written";
        EXPECT_FALSE(fs::exists(odd_dir / "results"));
    }
    ::unsetenv("KASCADE_TEST_ODD");
}

}  // namespace
