// pipeline/stages/schedule_stage.h: stage 3, from a similarity artifact: a Kascade schedule (roles, anchors, head
// maps) by the threshold, dp or fixed policy (schedule_policy.h). Stored as rows of `schedules` and
// `schedule_layers` and as artifacts/schedule/<key>.h5.
#pragma once

#include <string>
#include <vector>

#include "pipeline/runtime/attention_schedule.h"
#include "pipeline/stages/capture_stage.h"
#include "pipeline/stages/schedule_policy.h"

namespace kascade {

inline constexpr int kScheduleFormatVersion = 1;

struct ScheduleParams {
    SchedulePolicy policy = SchedulePolicy::Threshold;
    double threshold = 0.65;       ///< threshold policy
    int max_reuse_dist = 4;        ///< threshold policy
    int n_anchors = 3;             ///< dp policy, layer 0 included
    std::vector<int> anchor_list;  ///< fixed policy
    SimilarityMetric metric = SimilarityMetric::Recall;
    SimilarityAggregation aggregation = SimilarityAggregation::Mean;  ///< over query tiles
    HeadMapMode head_map = HeadMapMode::Argmax;
};

struct ScheduleResult {
    int64_t id = 0;  ///< schedules.id
    std::string key;
    bool cached = false;
};

ScheduleResult run_schedule(Workspace& ws, const std::string& similarity_key, const ScheduleParams& params,
                            bool force = false);

/// The content key of a schedule (pure).
std::string schedule_key(const std::string& similarity_key, const ScheduleParams& params);

/// A stored schedule as the runtime uses it.
AttentionSchedule attention_schedule_from(const Schedule& stored);

}  // namespace kascade
