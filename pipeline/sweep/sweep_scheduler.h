// pipeline/sweep/sweep_scheduler.h: which job of a sweep plan a free worker runs next (`kascade sweep --jobs N`).
//
// Pure bookkeeping, no I/O and no processes: the jobs' dependencies and states. A job may start once every job it
// reads is done; a failed job's dependants never start (they stay waiting, and the sweep reports them skipped).
// Jobs start in plan order, so a run with one worker computes them in the order a run in this process does.
#pragma once

#include <optional>
#include <vector>

namespace kascade {

enum class SweepJobState { Waiting, Running, Done, Failed };

class SweepScheduler {
  public:
    /// depends_on[i]: the jobs job i reads; stored[i]: job i's output is stored already (it starts done).
    SweepScheduler(std::vector<std::vector<int>> depends_on, const std::vector<bool>& stored);

    /// The first waiting job, in plan order, whose inputs are all done, now marked running; none if no job can
    /// start (every job started, or what waits needs a running or a failed job).
    std::optional<int> start_next();

    /// Ends a running job: done, or failed.
    void finish(int job, bool ok);

    /// Whether some job is running.
    bool any_running() const;

    /// The jobs that never started; once nothing runs and start_next() gives none, the dependants of failed jobs.
    std::vector<int> waiting() const;

    /// The jobs not stored when the sweep began: the ones it has to run.
    int to_compute() const { return to_compute_; }

    SweepJobState state(int job) const { return state_[job]; }

  private:
    bool ready(int job) const;

    std::vector<std::vector<int>> depends_on_;
    std::vector<SweepJobState> state_;
    int to_compute_ = 0;
};

}  // namespace kascade
