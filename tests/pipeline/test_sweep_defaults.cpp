// tests/pipeline/test_sweep_defaults.cpp: a sweep file that leaves a parameter out gets the default the command
// line shows for it (`kascade <stage> --help`), so the two cannot drift.
#include <gtest/gtest.h>

#include <regex>

#include "pipeline/sweep/sweep_spec.h"
#include "sweep_fixture.h"

namespace {

/// The default `kascade <command> --help` shows for `option` ("--ctx INT=512" -> "512").
std::string help_default(const std::string& command, const std::string& option) {
    const CommandResult r = run_kascade(command + " --help");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    const std::regex pattern(option + " [A-Z]+=([^ ]+)");
    EXPECT_TRUE(std::regex_search(r.out, m, pattern)) << option << " in:\n" << r.out;
    return m.size() > 1 ? m[1].str() : "";
}

double number(const std::string& text) {
    return std::stod(text);
}

TEST(SweepDefaults, AreTheCommandLineDefaults) {
    TempDir dir{"sweep_defaults"};
    const fs::path file = dir / "defaults.toml";
    write_text(file, "[model]\npath = \"" + kStoriesBin.string() + "\"\n[text]\npath = \"" + kStoriesText.string() +
                         "\"\n[grid]\ntopk_pct = 10\n"
                         "[[schedules]]\npolicy = \"threshold\"\n[[schedules]]\npolicy = \"dp\"\n");
    const kascade::SweepSpec spec = kascade::load_sweep_spec(file);

    ASSERT_EQ(spec.ctx.size(), 1u);
    EXPECT_EQ(spec.ctx[0], number(help_default("capture", "--ctx")));
    ASSERT_EQ(spec.tile.size(), 1u);
    EXPECT_EQ(spec.tile[0], number(help_default("capture", "--tile")));
    EXPECT_EQ(spec.calib_offset, number(help_default("capture", "--offset")));
    EXPECT_EQ(spec.calib_tokens, number(help_default("capture", "--calib-tokens")));
    EXPECT_EQ(spec.test_tokens, number(help_default("eval", "--eval-tokens")));

    ASSERT_EQ(spec.topk.size(), 1u);
    EXPECT_EQ(spec.topk[0].k_min_tokens, number(help_default("similarity", "--k-min")));
    EXPECT_EQ(spec.topk[0].round_k, number(help_default("similarity", "--round-k")));
    EXPECT_EQ(kascade::mode_name(spec.topk[0].k_rule), help_default("similarity", "--k-rule"));

    ASSERT_EQ(spec.schedules.size(), 2u);
    const kascade::ScheduleParams& threshold = spec.schedules[0];
    EXPECT_EQ(threshold.threshold, number(help_default("schedule", "--threshold")));
    EXPECT_EQ(threshold.max_reuse_dist, number(help_default("schedule", "--max-reuse-dist")));
    EXPECT_EQ(spec.schedules[1].n_anchors, number(help_default("schedule", "--anchors")));
    EXPECT_EQ(mode_name(threshold.metric), help_default("schedule", "--metric"));
    EXPECT_EQ(mode_name(threshold.aggregation), help_default("schedule", "--aggregation"));
    EXPECT_EQ(mode_name(threshold.head_map), help_default("schedule", "--head-map"));
}

}  // namespace
