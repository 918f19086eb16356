// pipeline/stages/capture_stage.h: stage 1, a dense forward pass over the calibration tokens that records, per
// window and layer, the pooled post-softmax attention mass per (KV head, query tile, key tile), each layer's
// importance, and optionally the post-RoPE Q and K. Output: artifacts/capture/<key>.h5 (results/README.md).
#pragma once

#include <string>

#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/stages/workspace.h"

namespace kascade {

inline constexpr int kCaptureFormatVersion = 2;  ///< 2: per-layer attribute "window"

struct CaptureParams {
    int64_t token_offset = 0;                  ///< first calibration token of the text
    int64_t n_tokens = 8192;                   ///< calibration tokens; only whole windows of ctx-1 tokens are used
    int ctx = PerplexityOptions{}.ctx;         ///< positions per window (BOS included), as eval's
    int tile = SparseAttentionOptions{}.tile;  ///< tokens per tile, as the sparse policies' default
    bool save_qk = false;
};

struct StageResult {
    std::string key;
    bool cached = false;  ///< the output already existed and nothing was computed
};

/// Runs (or finds in the cache) the capture; force recomputes it.
StageResult run_capture(Workspace& ws, LoadedModel& model, LoadedText& text, const CaptureParams& params,
                        bool force = false);

/// The content key of a capture (pure: a sweep plans with it before loading anything).
std::string capture_key(const std::string& model_hash, const std::string& tokenizer_hash, const std::string& text_hash,
                        const CaptureParams& params);

}  // namespace kascade
