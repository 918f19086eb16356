// tests/pipeline/test_sweep_scheduler.cpp: the order in which `kascade sweep --jobs N` starts a plan's jobs
// (pipeline/sweep/sweep_scheduler.h), in process: no workers, no model. Every expectation is derived by hand from
// the rule "the first waiting job, in plan order, whose inputs are all done".
#include <gtest/gtest.h>

#include "pipeline/sweep/sweep_scheduler.h"

namespace kascade {
namespace {

/// The chain of a small sweep: 0 dense, 1 capture, 2 similarity (reads 1), 3 schedule (reads 2), 4 kascade eval
/// (reads 0 and 3), 5 oracle eval (reads 0).
std::vector<std::vector<int>> sweep_chain() {
    return {{}, {}, {1}, {2}, {0, 3}, {0}};
}

TEST(SweepScheduler, StartsJobsInPlanOrderOnceTheirInputsAreDone) {
    SweepScheduler s(sweep_chain(), std::vector<bool>(6, false));
    EXPECT_EQ(s.to_compute(), 6);
    // Two workers: the two jobs without inputs.
    EXPECT_EQ(s.start_next(), 0);
    EXPECT_EQ(s.start_next(), 1);
    EXPECT_EQ(s.start_next(), std::nullopt);  // 2 waits for 1, 5 for 0
    s.finish(1, true);
    EXPECT_EQ(s.start_next(), 2);
    EXPECT_EQ(s.start_next(), std::nullopt);  // 3 waits for 2, 4 and 5 for 0
    s.finish(0, true);
    EXPECT_EQ(s.start_next(), 5);  // 4 still waits for 3
    s.finish(2, true);
    EXPECT_EQ(s.start_next(), 3);
    s.finish(3, true);
    EXPECT_EQ(s.start_next(), 4);
    EXPECT_TRUE(s.any_running());
    s.finish(4, true);
    s.finish(5, true);
    EXPECT_FALSE(s.any_running());
    EXPECT_EQ(s.start_next(), std::nullopt);
    EXPECT_TRUE(s.waiting().empty());
}

TEST(SweepScheduler, OneWorkerRunsThePlanInOrder) {
    SweepScheduler s(sweep_chain(), std::vector<bool>(6, false));
    std::vector<int> order;
    while (const std::optional<int> job = s.start_next()) {
        order.push_back(*job);
        s.finish(*job, true);
    }
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(SweepScheduler, StoredJobsAreDoneAndNeverStarted) {
    // Dense and capture stored: the similarity and the oracle eval can start at once.
    SweepScheduler s(sweep_chain(), {true, true, false, false, false, false});
    EXPECT_EQ(s.to_compute(), 4);
    EXPECT_EQ(s.state(0), SweepJobState::Done);
    EXPECT_EQ(s.state(1), SweepJobState::Done);
    EXPECT_EQ(s.start_next(), 2);
    EXPECT_EQ(s.start_next(), 5);
    EXPECT_EQ(s.start_next(), std::nullopt);
}

TEST(SweepScheduler, AFailedJobsDependantsNeverStart) {
    SweepScheduler s(sweep_chain(), std::vector<bool>(6, false));
    EXPECT_EQ(s.start_next(), 0);
    EXPECT_EQ(s.start_next(), 1);
    s.finish(1, false);  // the capture fails: similarity, schedule and kascade eval cannot run
    EXPECT_EQ(s.state(1), SweepJobState::Failed);
    EXPECT_EQ(s.start_next(), std::nullopt);
    s.finish(0, true);
    EXPECT_EQ(s.start_next(), 5);  // the oracle eval reads only the dense run
    s.finish(5, true);
    EXPECT_EQ(s.start_next(), std::nullopt);
    EXPECT_FALSE(s.any_running());
    EXPECT_EQ(s.waiting(), (std::vector<int>{2, 3, 4}));
}

TEST(SweepScheduler, AJobWaitsForEveryInput) {
    // 2 reads 0 and 1: done 0 alone does not start it, and a failed 1 keeps it from starting at all.
    SweepScheduler s({{}, {}, {0, 1}}, std::vector<bool>(3, false));
    EXPECT_EQ(s.start_next(), 0);
    EXPECT_EQ(s.start_next(), 1);
    s.finish(0, true);
    EXPECT_EQ(s.start_next(), std::nullopt);
    s.finish(1, false);
    EXPECT_EQ(s.start_next(), std::nullopt);
    EXPECT_EQ(s.waiting(), (std::vector<int>{2}));
}

TEST(SweepScheduler, AStoredInputCountsAsDone) {
    // 1 reads the stored 0; a stored job is never started even when it is waiting in plan order.
    SweepScheduler s({{}, {0}}, {true, false});
    EXPECT_EQ(s.start_next(), 1);
    EXPECT_EQ(s.start_next(), std::nullopt);
    s.finish(1, true);
    EXPECT_TRUE(s.waiting().empty());
}

TEST(SweepScheduler, AnEmptyPlanHasNothingToStart) {
    SweepScheduler s({}, {});
    EXPECT_EQ(s.to_compute(), 0);
    EXPECT_EQ(s.start_next(), std::nullopt);
    EXPECT_FALSE(s.any_running());
    EXPECT_TRUE(s.waiting().empty());
}

}  // namespace
}  // namespace kascade
