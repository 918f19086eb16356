// tests/store/atomic_file_test.cpp: the one atomic-write helper (io/atomic_file.h): a file appears complete or not
// at all, and nothing but the file is left in its folder, whether the write succeeds or fails.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "common/temp_dir.h"
#include "io/atomic_file.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;

std::set<std::string> names_in(const fs::path& folder) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) names.insert(entry.path().filename().string());
    return names;
}

std::string contents_of(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST(AtomicFile, WritesTheFileAndNothingElse) {
    test::TempDir dir{"atomic_file"};
    write_file_atomic(dir / "sub" / "a.txt", "first");
    write_file_atomic(dir / "sub" / "a.txt", "second, longer");
    EXPECT_EQ(contents_of(dir / "sub" / "a.txt"), "second, longer");
    EXPECT_EQ(names_in(dir / "sub"), std::set<std::string>{"a.txt"});
}

TEST(AtomicFile, UncommittedLeavesTheOldFile) {
    test::TempDir dir{"atomic_file"};
    write_file_atomic(dir / "a.txt", "old");
    {
        AtomicFile file(dir / "a.txt");
        file.write("new contents");
        EXPECT_EQ(contents_of(dir / "a.txt"), "old");  // not visible before commit()
    }                                                  // destroyed without commit(), as by an exception
    EXPECT_EQ(contents_of(dir / "a.txt"), "old");
    EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"a.txt"});
}

TEST(AtomicFile, AFailedRenameIsAnErrorNamingTheFileAndLeavesNoPartialFile) {
    test::TempDir dir{"atomic_file"};
    // The destination is a folder that is not empty: rename() must fail.
    fs::create_directories(dir / "target");
    write_file_atomic(dir / "target" / "inside.txt", "x");
    std::string message;
    try {
        write_file_atomic(dir / "target", "contents");
    } catch (const Error& e) {
        message = e.what();
    }
    EXPECT_NE(message.find("cannot rename"), std::string::npos) << message;
    EXPECT_NE(message.find((dir / "target").string() + "\""), std::string::npos) << message;
    EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"target"});
}

TEST(AtomicFile, CopyIsCompleteAndLeavesNoPartialFile) {
    test::TempDir dir{"atomic_file"};
    write_file_atomic(dir / "from.bin", std::string(100000, 'k'));
    copy_file_atomic(dir / "from.bin", dir / "copies" / "to.bin");
    copy_file_atomic(dir / "from.bin", dir / "copies" / "to.bin");  // again, over the existing link or copy
    EXPECT_EQ(contents_of(dir / "copies" / "to.bin"), std::string(100000, 'k'));
    EXPECT_EQ(names_in(dir / "copies"), std::set<std::string>{"to.bin"});
}

}  // namespace
}  // namespace kascade
