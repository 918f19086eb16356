// tests/cli/test_hardening_user_files.cpp: no command overwrites or deletes a file it did not write unless told so
// with --force (issue 25, class 1): random-model --out (a folder holding a model, a text file), report --out and
// the default report folder (a report the user added files to), the report a sweep writes.
#include <gtest/gtest.h>

#include "pipeline/sweep_fixture.h"

namespace {

const fs::path kTinyConfig = kShared / "models/stories260K-hf/config.json";

/// Refused: exit 1, one line "kascade: error: ..." containing `needle` and naming --force; nothing on stdout.
void expect_refused(const CommandResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("kascade: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

/// random-model --out: a folder holding a model, or a text file.
void check_random_model(const TempDir& dir) {
    const fs::path model = dir / "model";
    fs::create_directories(model);
    write_text(model / "config.json", "{\"mine\": true}\n");
    write_text(model / "model.safetensors", "my weights");
    const std::string command = "random-model --config " + shell_quote(kTinyConfig) + " --layers 1 --out ";

    CommandResult r = run_kascade(command + shell_quote(model));
    expect_refused(r, "--out \"" + model.string() + "\" already holds config.json and model.safetensors");
    EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
    EXPECT_TRUE(read_all(model / "config.json") == "{\"mine\": true}\n") << "model / config.json was changed";
    EXPECT_TRUE(read_all(model / "model.safetensors") == "my weights") << "model / model.safetensors was changed";

    // One of the two files is enough to refuse.
    fs::remove(model / "model.safetensors");
    expect_refused(run_kascade(command + shell_quote(model)), "already holds config.json;");
    EXPECT_TRUE(read_all(model / "config.json") == "{\"mine\": true}\n") << "model / config.json was changed";
    EXPECT_FALSE(fs::exists(model / "model.safetensors"));

    // A text given as --out is not a folder: refused, even with --force.
    const fs::path text = dir.write("story.txt", "Once upon a time\n");
    for (const char* force : {"", " --force"}) {
        expect_refused(run_kascade(command + shell_quote(text) + force),
                       "--out \"" + text.string() + "\" exists and is not a folder");
        EXPECT_TRUE(read_all(text) == "Once upon a time\n") << "text was changed";
    }

    // Told so, it replaces them.
    r = run_kascade(command + shell_quote(model) + " --force");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(read_all(model / "config.json").find("\"num_hidden_layers\": 1"), std::string::npos);
    EXPECT_TRUE(fs::exists(model / "model.safetensors"));
}

/// report --out, the default report folder and a sweep's report folder, once the user has put a file into them.
void check_reports(const TempDir& dir) {
    const fs::path results = dir / "results";
    const CommandResult run =
        run_kascade("eval --results " + shell_quote(results) + " --model " + shell_quote(kStoriesBin) + " --text " +
                    shell_quote(kStoriesText) + " --method dense --ctx 128 --eval-tokens 254");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const std::string report = "report --results " + shell_quote(results);

    // --out: a report kascade wrote may be replaced; once the user has put a file into it, only with --force.
    const fs::path out = dir / "my-report";
    ASSERT_EQ(run_kascade(report + " --out " + shell_quote(out)).exit_code, 0);
    ASSERT_EQ(run_kascade(report + " --out " + shell_quote(out)).exit_code, 0);  // its own report: replaced
    write_text(out / "notes.txt", "what I saw");
    const std::string index = read_all(out / "index.html");
    CommandResult r = run_kascade(report + " --out " + shell_quote(out));
    expect_refused(r, "--out \"" + out.string() + "\" holds \"notes.txt\", which kascade report did not write");
    EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
    EXPECT_TRUE(read_all(out / "notes.txt") == "what I saw") << "out / notes.txt was changed";
    EXPECT_TRUE(read_all(out / "index.html") == index) << "out / index.html was changed";

    // The default folder, <results>/report, likewise (a figure the user added: no gnuplot script drew it).
    ASSERT_EQ(run_kascade(report).exit_code, 0);
    write_text(results / "report" / "my-figure.png", "drawn by hand");
    expect_refused(run_kascade(report), "holds \"my-figure.png\"");
    EXPECT_TRUE(read_all(results / "report" / "my-figure.png") == "drawn by hand")
        << "results / report / my-figure.png was changed";

    // The report a sweep writes: its runs are stored, the report is left alone with a warning.
    const fs::path sweep = dir / "dense-only.toml";
    std::string toml = tiny_sweep_toml();
    toml = toml.substr(0, toml.find("[[schedules]]")) + "[baselines]\nmethods = [\"dense\"]\n";
    write_text(sweep, toml);
    const std::string run_sweep = "sweep " + shell_quote(sweep) + " --results " + shell_quote(results);
    ASSERT_EQ(run_kascade(run_sweep).exit_code, 0);
    const fs::path sweep_report = results / "reports" / "dense-only";
    ASSERT_TRUE(fs::exists(sweep_report / "index.html"));
    write_text(sweep_report / "notes.txt", "mine");
    r = run_kascade(run_sweep);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("kascade: warning: no report written"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("holds \"notes.txt\""), std::string::npos) << r.err;
    EXPECT_TRUE(read_all(sweep_report / "notes.txt") == "mine") << "sweep_report / notes.txt was changed";

    // Told so, the report replaces the folder and what was in it.
    r = run_kascade(report + " --out " + shell_quote(out) + " --force");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(out / "notes.txt"));
    EXPECT_TRUE(fs::exists(out / "index.html"));
}

TEST(UserFiles, NoCommandReplacesWhatItDidNotWriteWithoutForce) {
    TempDir dir("user-files");
    check_random_model(dir);
    check_reports(dir);
}

}  // namespace
