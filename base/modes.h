// base/modes.h: every mode the layers share, each an enum with its one name table (base/enum_names.h). The names
// are those of the CLI, the sweep files, the results database's columns (whose CHECK lists tests/store/
// test_mode_names.cpp compares with these tables), the content keys and the report alike. Read and write them only
// through mode_name / mode_from_name / mode_names / parse_mode.
#pragma once

#include <cstdint>
#include <string>

#include "base/enum_names.h"

namespace kascade {

// ---- What an evaluation runs ------------------------------------------------------------------------------------

enum class EvalMethod {
    Dense,       ///< exact attention: the baseline every sparse run is compared with
    Kascade,     ///< a stored schedule: anchor layers select their top-k keys, reuse layers take their anchor's
    Oracle,      ///< every layer but 0 selects its own top-k (the ceiling of a reuse schedule)
    Streaming,   ///< sink tokens + the most recent keys, same budget
    Quest,       ///< pages of keys ranked by an upper bound from per-page min/max keys (decode only)
    OmniKv,      ///< filter layers pick one key set for all heads, used until the next filter layer (decode only)
    LessIsMore,  ///< selection layers unite every head's top keys with sinks and a recent window (decode only)
};
template <>
struct EnumNameTable<EvalMethod> {
    static constexpr EnumNames<EvalMethod, 7> names{{{EvalMethod::Dense, "dense"},
                                                     {EvalMethod::Kascade, "kascade"},
                                                     {EvalMethod::Oracle, "oracle"},
                                                     {EvalMethod::Streaming, "streaming"},
                                                     {EvalMethod::Quest, "quest"},
                                                     {EvalMethod::OmniKv, "omnikv"},
                                                     {EvalMethod::LessIsMore, "lessismore"}}};
};

/// Whether a method selects keys only for generated tokens (its prefill is dense attention).
constexpr bool is_decode_only_method(EvalMethod method) {
    return method == EvalMethod::Quest || method == EvalMethod::OmniKv || method == EvalMethod::LessIsMore;
}

enum class EvalPhase {
    Prefill,  ///< perplexity over windows, every position attending in one causal pass
    Decode,   ///< a dense prefill of a prompt, then one token at a time through the method's decode policy
};
template <>
struct EnumNameTable<EvalPhase> {
    static constexpr EnumNames<EvalPhase, 2> names{{{EvalPhase::Prefill, "prefill"}, {EvalPhase::Decode, "decode"}}};
};

/// Whether a task's generation prefills the prompt with the method (the paper's setting) or densely (its
/// decode-only ablation).
enum class TaskPrefill { Sparse, Dense };
template <>
struct EnumNameTable<TaskPrefill> {
    static constexpr EnumNames<TaskPrefill, 2> names{{{TaskPrefill::Sparse, "sparse"}, {TaskPrefill::Dense, "dense"}}};
};

// ---- How keys are selected (kernels/attention_types.h) ---------------------------------------------------------

/// Which keys a selection keeps, as whole key tiles or as individual keys. Token is the paper's (its reference code
/// keeps the top-k individual keys per (KV head, query tile)); tile is the block-sparse variant of the first CPU
/// prototype.
enum class KeyGranularity { Token, Tile };
template <>
struct EnumNameTable<KeyGranularity> {
    static constexpr EnumNames<KeyGranularity, 2> names{
        {{KeyGranularity::Token, "token"}, {KeyGranularity::Tile, "tile"}}};
};

/// What an anchor pools per (KV head, query tile, key or key tile) to rank keys: the paper's sum of post-softmax
/// probabilities over the group's query heads and the tile's queries, or the pre-softmax ablation, the max scaled raw
/// score over them.
enum class Pooling { PostSoftmax, PreSoftmax };
template <>
struct EnumNameTable<Pooling> {
    static constexpr EnumNames<Pooling, 2> names{
        {{Pooling::PostSoftmax, "post_softmax"}, {Pooling::PreSoftmax, "pre_softmax"}}};
};

/// What the percentage of TopKRule::pct (kernels/attention_types.h) is a percentage of (the rule has no effect
/// with TopKRule::tiles):
///   sequence: the paper's default, k = min(max(k_min, floor(p% * L)), L) - tile with L the whole sequence (the
///             window, if the layer has one and it is shorter): one k for every query tile; the tile's own keys
///             (attended anyway) are taken out of the budget, as the reference code's `k -= tile` does.
///   rolling:  the paper's rolling prefill, k_s = max(k_min, floor(p% * s)) for the tile starting at position s
///             (s capped by the window); tiles with s <= k_s see all their candidates, i.e. run dense.
///   visible:  the first prototype's rule, k = max(k_min, floor(p% * V)) with V the keys the tile's last query sees
///             (min(window, (q_tile + 1) * tile)).
enum class KRule { Sequence, Rolling, Visible };
template <>
struct EnumNameTable<KRule> {
    static constexpr EnumNames<KRule, 3> names{
        {{KRule::Sequence, "sequence"}, {KRule::Rolling, "rolling"}, {KRule::Visible, "visible"}}};
};

// ---- Schedules (pipeline/stages/schedule_policy.h) -------------------------------------------------------------

/// How a schedule chooses its anchors.
enum class SchedulePolicy { Threshold, Dp, Fixed };
template <>
struct EnumNameTable<SchedulePolicy> {
    static constexpr EnumNames<SchedulePolicy, 3> names{
        {{SchedulePolicy::Threshold, "threshold"}, {SchedulePolicy::Dp, "dp"}, {SchedulePolicy::Fixed, "fixed"}}};
};

/// Which anchor KV head each reuse KV head follows: the best one by similarity, its own index, or all the first.
enum class HeadMapMode { Argmax, Identity, Pooled };
template <>
struct EnumNameTable<HeadMapMode> {
    static constexpr EnumNames<HeadMapMode, 3> names{
        {{HeadMapMode::Argmax, "argmax"}, {HeadMapMode::Identity, "identity"}, {HeadMapMode::Pooled, "pooled"}}};
};

/// What a layer of a schedule does. The values are stored in schedule files (HDF5 int8): never renumber.
enum class LayerRole : int8_t { Dense = 0, Anchor = 1, Reuse = 2 };
template <>
struct EnumNameTable<LayerRole> {
    static constexpr EnumNames<LayerRole, 3> names{
        {{LayerRole::Dense, "dense"}, {LayerRole::Anchor, "anchor"}, {LayerRole::Reuse, "reuse"}}};
};

/// What a layer did in a run (run_layers.role): a schedule's roles, and those of the baselines' layers.
enum class RunLayerRole {
    Dense,      ///< every key
    Anchor,     ///< selected its own top-k keys (Kascade's anchors, the oracle's layers)
    Reuse,      ///< attended keys another layer selected
    Streaming,  ///< sinks and the most recent keys
    Quest,      ///< pages ranked by their key bounds
    Filter,     ///< OmniKV: attended every key and picked the shared set
    Selection,  ///< LessIsMore: attended every key and picked the shared set
};
template <>
struct EnumNameTable<RunLayerRole> {
    static constexpr EnumNames<RunLayerRole, 7> names{{{RunLayerRole::Dense, "dense"},
                                                       {RunLayerRole::Anchor, "anchor"},
                                                       {RunLayerRole::Reuse, "reuse"},
                                                       {RunLayerRole::Streaming, "streaming"},
                                                       {RunLayerRole::Quest, "quest"},
                                                       {RunLayerRole::Filter, "filter"},
                                                       {RunLayerRole::Selection, "selection"}}};
};

/// What a schedule's layer role does in a run.
constexpr RunLayerRole run_layer_role(LayerRole role) {
    switch (role) {
        case LayerRole::Anchor:
            return RunLayerRole::Anchor;
        case LayerRole::Reuse:
            return RunLayerRole::Reuse;
        case LayerRole::Dense:
            break;
    }
    return RunLayerRole::Dense;
}

/// How well one layer's top-k keys serve another: the share of its top-k attention mass they hold (recall), or
/// the overlap of the two sets (jaccard).
enum class SimilarityMetric { Recall, Jaccard };
template <>
struct EnumNameTable<SimilarityMetric> {
    static constexpr EnumNames<SimilarityMetric, 2> names{
        {{SimilarityMetric::Recall, "recall"}, {SimilarityMetric::Jaccard, "jaccard"}}};
};

/// How a similarity is summarised over query tiles.
enum class SimilarityAggregation { Mean, Min };
template <>
struct EnumNameTable<SimilarityAggregation> {
    static constexpr EnumNames<SimilarityAggregation, 2> names{
        {{SimilarityAggregation::Mean, "mean"}, {SimilarityAggregation::Min, "min"}}};
};

/// The measure a similarity artifact stores per (metric, aggregation): its dataset name, "recall_mean", ...
inline std::string similarity_measure_name(SimilarityMetric metric, SimilarityAggregation aggregation) {
    return std::string(mode_name(metric)) + "_" + std::string(mode_name(aggregation));
}

// ---- Numerics ----------------------------------------------------------------------------------------------------

/// The dtype weight matrices have in memory: as in the file, or all converted at load (--weights-dtype).
enum class WeightsDType { File, F32, BF16 };
template <>
struct EnumNameTable<WeightsDType> {
    static constexpr EnumNames<WeightsDType, 3> names{
        {{WeightsDType::File, "file"}, {WeightsDType::F32, "f32"}, {WeightsDType::BF16, "bf16"}}};
};

/// How a matrix product treats its activations (kernels/matmul.h): exactly in fp32, or rounded to BF16 for BF16
/// weights (--matmul). Bf16 also rounds decode attention's query and softmax weights over a BF16 KV cache
/// (kernels/decode_bf16_dot.h).
enum class MatmulPrecision { Exact, Bf16 };
template <>
struct EnumNameTable<MatmulPrecision> {
    static constexpr EnumNames<MatmulPrecision, 2> names{
        {{MatmulPrecision::Exact, "exact"}, {MatmulPrecision::Bf16, "bf16"}}};
};

/// The element type of the KV cache (--kv-dtype): fp32, or BF16 (half the bytes a long-context decode reads; the
/// kernels widen the rows to fp32 as they load them, so only the stored keys and values are rounded, unless
/// MatmulPrecision::Bf16 asks for BF16 decode products).
enum class KvDType { F32, BF16 };
template <>
struct EnumNameTable<KvDType> {
    static constexpr EnumNames<KvDType, 2> names{{{KvDType::F32, "f32"}, {KvDType::BF16, "bf16"}}};
};

}  // namespace kascade
