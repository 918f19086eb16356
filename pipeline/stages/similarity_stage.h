// pipeline/stages/similarity_stage.h: stage 2, from a capture: for every layer pair (a < b) and KV-head pair, how
// well a's top-k tiles serve b (mass recall and Jaccard), aggregated over query tiles by mean and by min and then
// averaged over the capture's windows. Output: artifacts/similarity/<key>.h5 (results/README.md).
#pragma once

#include <string>

#include "kernels/attention_types.h"
#include "pipeline/stages/capture_stage.h"
#include "pipeline/stages/layer_similarity.h"

namespace kascade {

inline constexpr int kSimilarityFormatVersion = 1;  ///< token granularity adds attributes only

/// granularity token selects individual keys (the paper) and needs a capture made with --save-qk (the per-key mass
/// is computed from the stored queries and keys); tile selects key tiles from the stored tile mass.
StageResult run_similarity(Workspace& ws, const std::string& capture_key, const TopKRule& topk,
                           KeyGranularity granularity, bool force = false);
std::string similarity_key(const std::string& capture_key, const TopKRule& topk, KeyGranularity granularity);

/// Reads one measure of a similarity artifact.
LayerSimilarity load_layer_similarity(Workspace& ws, const std::string& similarity_key, SimilarityMetric metric,
                                      SimilarityAggregation aggregation);

}  // namespace kascade
