// tests/fuzz/replay_test.cpp: every committed seed (corpus/<target>/) and every input a fuzzer once crashed on
// (regressions/<target>/) goes through its fuzz entry in the normal test run, so a fixed crash stays fixed without
// clang or libFuzzer. A crash or a broken invariant aborts this test and any exception other than kascade::Error
// fails it naming the file. Seeds are well-formed files, so each must also be accepted: an entry that rejected its
// own seeds would fuzz nothing but the first check.
#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_entries.h"

namespace kascade::fuzz {

// Test names and failure messages show the target's name.
void PrintTo(const FuzzTarget& target, std::ostream* out) {
    *out << target.name;
}

namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(KASCADE_SOURCE_DIR) / "tests" / "fuzz";

std::vector<fs::path> files_in(const fs::path& dir) {
    std::vector<fs::path> files;
    if (!fs::is_directory(dir)) return files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

// Runs `target` on every file of `dir`; returns how many there were. With `must_load`, each must be accepted.
std::size_t replay(const FuzzTarget& target, const fs::path& dir, bool must_load) {
    const std::vector<fs::path> files = files_in(dir);
    for (const fs::path& file : files) {
        std::ifstream in(file, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        try {
            const bool loaded =
                target.entry(FuzzInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
            EXPECT_TRUE(loaded || !must_load) << "fuzz_" << target.name << " rejects its seed " << file;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "fuzz_" << target.name << " on " << file << " threw " << e.what();
        }
    }
    return files.size();
}

class FuzzReplay : public testing::TestWithParam<FuzzTarget> {};

TEST_P(FuzzReplay, SeedsLoad) {
    EXPECT_GT(replay(GetParam(), kFuzzDir / "corpus" / GetParam().name, true), 0u)
        << "no seeds in tests/fuzz/corpus/" << GetParam().name;
}

TEST_P(FuzzReplay, RegressionInputsLoadOrFailWithKascadeError) {
    replay(GetParam(), kFuzzDir / "regressions" / GetParam().name, false);
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, testing::ValuesIn(kFuzzTargets),
                         [](const testing::TestParamInfo<FuzzTarget>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kascade::fuzz
