#include "pipeline/sweep/sweep_scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace kascade {

SweepScheduler::SweepScheduler(std::vector<std::vector<int>> depends_on, const std::vector<bool>& stored)
    : depends_on_(std::move(depends_on)), state_(depends_on_.size(), SweepJobState::Waiting) {
    KASCADE_ASSERT(stored.size() == depends_on_.size());
    for (size_t i = 0; i < stored.size(); ++i) {
        if (stored[i]) state_[i] = SweepJobState::Done;
        to_compute_ += stored[i] ? 0 : 1;
    }
}

bool SweepScheduler::ready(int job) const {
    if (state_[job] != SweepJobState::Waiting) return false;
    for (int d : depends_on_[job])
        if (state_[d] != SweepJobState::Done) return false;
    return true;
}

std::optional<int> SweepScheduler::start_next() {
    for (int i = 0; i < static_cast<int>(state_.size()); ++i) {
        if (!ready(i)) continue;
        state_[i] = SweepJobState::Running;
        return i;
    }
    return std::nullopt;
}

void SweepScheduler::finish(int job, bool ok) {
    KASCADE_ASSERT(state_[job] == SweepJobState::Running);
    state_[job] = ok ? SweepJobState::Done : SweepJobState::Failed;
}

bool SweepScheduler::any_running() const {
    return std::find(state_.begin(), state_.end(), SweepJobState::Running) != state_.end();
}

std::vector<int> SweepScheduler::waiting() const {
    std::vector<int> jobs;
    for (int i = 0; i < static_cast<int>(state_.size()); ++i)
        if (state_[i] == SweepJobState::Waiting) jobs.push_back(i);
    return jobs;
}

}  // namespace kascade
