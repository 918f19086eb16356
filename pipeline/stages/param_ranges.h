// pipeline/stages/param_ranges.h: the range of every numeric stage parameter a user sets, read by the command-line
// options (pipeline/cli/option_range.h) and by the sweep file reader (sweep_spec.cpp), so that the two cannot
// accept different values. The defaults are those of the parameter structs (CaptureParams, TopKRule,
// ScheduleParams, EvalParams).
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

namespace kascade {

/// The values a parameter may take: [min, max], or (min, max] with min_open; max may be infinite.
struct ValueRange {
    double min = 0;
    double max = std::numeric_limits<double>::infinity();
    bool min_open = false;

    /// Written so that NaN is outside: every comparison with it is false.
    bool contains(double value) const { return (min_open ? value > min : value >= min) && value <= max; }

    /// What the error messages say a value must be: ">= 2", "in [0, 1]", "in (0, 100]".
    std::string text() const {
        if (std::isinf(max)) return fmt::format("{} {}", min_open ? ">" : ">=", min);
        return fmt::format("{}{}, {}]", min_open ? "in (" : "in [", min, max);
    }
};

namespace param_range {

inline constexpr ValueRange kTokenOffset{0};         ///< first token of a calibration or test range
inline constexpr ValueRange kTokenCount{1};          ///< tokens of a calibration or test range
inline constexpr ValueRange kCtx{2};                 ///< positions per window, BOS included
inline constexpr ValueRange kTile{1};                ///< tokens per tile
inline constexpr ValueRange kTopKTiles{1};           ///< key tiles kept per query tile
inline constexpr ValueRange kTopKPct{0, 100, true};  ///< % of the context kept
inline constexpr ValueRange kKMin{0};                ///< tokens kept at least by the pct rule (0: no floor)
inline constexpr ValueRange kRoundK{0};              ///< k rounded up to a multiple of this (0: no rounding)
inline constexpr ValueRange kThreshold{0, 1};        ///< threshold policy: minimum similarity to reuse
inline constexpr ValueRange kMaxReuseDist{1};        ///< threshold policy: layers from the anchor
inline constexpr ValueRange kAnchors{1};             ///< dp policy: anchors, layer 0 included
inline constexpr ValueRange kLayer{0};               ///< a layer index (fixed policy's anchor list)
inline constexpr ValueRange kPromptTokens{1};        ///< decode: positions prefilled per window, BOS included
inline constexpr ValueRange kDecodeTokens{1};        ///< decode: positions decoded one at a time per window
inline constexpr ValueRange kQuestPage{1};           ///< quest: keys per page
inline constexpr ValueRange kWindowRatio{0, 1};      ///< lessismore: budget share of sinks + recent keys
inline constexpr ValueRange kTaskLength{1};          ///< task: prompt tokens, BOS included
inline constexpr ValueRange kDepthCount{1};          ///< task: needle depths evenly spaced over 0-100 %
inline constexpr ValueRange kDepthPct{0, 100};       ///< task: a needle depth, % of the haystack
inline constexpr ValueRange kTaskSamples{1};         ///< task: samples per length and depth
inline constexpr ValueRange kMaxNewTokens{1};        ///< task: answer token limit
inline constexpr ValueRange kTaskSeed{0};            ///< task: what the samples are drawn from
inline constexpr ValueRange kBatch{1, 4096};         ///< generate, task: sequences decoded together

}  // namespace param_range

}  // namespace kascade
