// pipeline/stages/eval_stage.h: stage 4, perplexity of the model on the test tokens with a sparse attention method,
// beside the dense perplexity of the same tokens; logs one run (parameters, metrics, per-layer rows) in SQLite.
//
// Methods: kascade (a stored schedule), oracle (every layer but 0 keeps its own top-k), streaming (sink + recent
// tiles, same budget), dense (the baseline; every sparse run finds or makes the dense run of its tokens).
#pragma once

#include <optional>
#include <string>

#include "kernels/attention_types.h"
#include "pipeline/stages/capture_stage.h"

namespace kascade {

inline constexpr int kEvalFormatVersion = 1;

struct EvalParams {
    std::string method = "kascade";             ///< kascade | oracle | streaming | dense
    std::optional<int64_t> schedule_id;         ///< method kascade
    std::optional<TopKRule> topk;               ///< default for kascade: the rule the schedule's similarity used
    std::optional<int> tile;                    ///< default for kascade: the capture's tile; else 16
    std::optional<KeyGranularity> granularity;  ///< default for kascade: the similarity's; else token (the paper)
    std::optional<Pooling> pooling;             ///< default post_softmax (the paper)
    int ctx = 512;
    std::optional<int64_t> token_offset;  ///< default for kascade: right after the calibration range; else 0
    int64_t n_tokens = 8192;              ///< test tokens scored (0: all after the offset)
};

struct EvalResult {
    int64_t run_id = 0;
    bool cached = false;
};

EvalResult run_eval(Workspace& ws, LoadedModel& model, LoadedText& text, const EvalParams& params, bool force = false);

/// Everything a run's content key is made of, with defaults already resolved.
struct EvalKeyInputs {
    std::string model_hash, tokenizer_hash, text_hash;
    std::string method;
    int ctx = 0;
    int64_t token_offset = 0;
    int64_t n_tokens = 0;
    int tile = 0;                                        ///< ignored for dense
    TopKRule topk;                                       ///< ignored for dense
    std::string schedule_key;                            ///< method kascade
    KeyGranularity granularity = KeyGranularity::Token;  ///< ignored for dense
    Pooling pooling = Pooling::PostSoftmax;              ///< ignored for dense
};

/// The content key of a run (pure: a sweep's --dry-run uses it to tell what is stored already).
std::string eval_key(const EvalKeyInputs& inputs);

}  // namespace kascade
