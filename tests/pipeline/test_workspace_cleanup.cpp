// tests/pipeline/test_workspace_cleanup.cpp: a command that fails removes what it created in the results folder,
// and only that: files and folders another process made meanwhile stay, as does anything not empty.
#include <gtest/gtest.h>

#include <stdexcept>

#include "pipeline/stages/workspace.h"
#include "sweep_fixture.h"

namespace {

/// Opens a workspace on `results`, lets `meanwhile` act (another process, or the failing stage itself), then fails.
template <typename Meanwhile>
void fail_in_workspace(const fs::path& results, Meanwhile meanwhile) {
    try {
        kascade::Workspace ws(results);
        meanwhile(ws);
        throw std::runtime_error("the stage failed");
    } catch (const std::runtime_error&) {
    }
}

TEST(WorkspaceCleanup, AFailedCommandLeavesNothingItCreated) {
    TempDir dir{"ws_cleanup"};
    const fs::path results = dir / "results";
    fail_in_workspace(results, [](kascade::Workspace& ws) { ws.new_artifact_path("capture", "0123456789abcdef"); });
    EXPECT_FALSE(fs::exists(results));
}

TEST(WorkspaceCleanup, KeepsWhatAnotherProcessCreatedMeanwhile) {
    TempDir dir{"ws_cleanup"};
    const fs::path results = dir / "results";
    // Another process shares the new folder and is writing an artifact when this one fails.
    const fs::path other = results / "artifacts" / "capture" / "fedcba9876543210.h5.partial-otherhost-1";
    fail_in_workspace(results, [&](kascade::Workspace& ws) {
        ws.new_artifact_path("capture", "0123456789abcdef");
        fs::create_directories(other.parent_path());
        write_text(other, "being written");
    });
    EXPECT_TRUE(fs::exists(other));
    EXPECT_FALSE(fs::exists(results / "kascade.db"));  // its own database, still empty, is gone
}

TEST(WorkspaceCleanup, KeepsAFolderThatExistedAndADatabaseItDidNotCreate) {
    TempDir dir{"ws_cleanup"};
    const fs::path results = dir / "results";
    { kascade::Workspace first(results); }  // an earlier command that succeeded
    fail_in_workspace(results, [](kascade::Workspace&) {});
    EXPECT_TRUE(fs::exists(results / "kascade.db"));
}

}  // namespace
