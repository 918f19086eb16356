// pipeline/runtime/lessismore_attention.cpp: the LessIsMore decode policy.
#include "pipeline/runtime/lessismore_attention.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/decode_head_scores.h"

namespace kascade {

void check_lessismore_options(const std::vector<int>& selection_layers, double window_ratio, int n_layers,
                              std::string_view layers_option, std::string_view ratio_option) {
    const std::string list = fmt::format("{}", fmt::join(selection_layers, ","));
    KASCADE_CHECK(!selection_layers.empty(),
                  "method lessismore needs its selection layers ({} L,L,...; the Kascade paper's for "
                  "Llama-3.1-8B: 2,13)",
                  layers_option);
    for (size_t i = 0; i < selection_layers.size(); ++i) {
        const int l = selection_layers[i];
        KASCADE_CHECK(l >= 0 && l < n_layers, "invalid {}={}: layer {} must be in [0, {}] (the model has {} layers)",
                      layers_option, list, l, n_layers - 1, n_layers);
        KASCADE_CHECK(i == 0 || l > selection_layers[i - 1], "invalid {}={}: the layers must be ascending",
                      layers_option, list);
    }
    KASCADE_CHECK(window_ratio >= 0 && window_ratio <= 1, "invalid {}={} (must be in [0, 1])", ratio_option,
                  window_ratio);
}

LessIsMoreSplit lessismore_split(int budget, double window_ratio, int sink_tokens) {
    // The reference's arithmetic: middle_budget = int(token_budget * (1 - lim_ratio_factor)), in doubles.
    LessIsMoreSplit s;
    s.by_score = static_cast<int>(static_cast<double>(budget) * (1.0 - window_ratio));
    const int rest = budget - s.by_score;
    s.sinks = rest < sink_tokens ? 0 : sink_tokens;
    s.recent = rest - s.sinks;
    return s;
}

std::vector<int32_t> lessismore_selection(const float* scores, int n_heads, int row_stride, int first, int end,
                                          int budget, double window_ratio, int sink_tokens) {
    KASCADE_ASSERT(budget >= 0 && budget <= std::max(0, end - first));
    std::vector<int32_t> keys;
    if (budget >= end - first) {
        for (int j = first; j < end; ++j) keys.push_back(j);
        return keys;
    }
    const LessIsMoreSplit split = lessismore_split(budget, window_ratio, sink_tokens);
    for (int j = first; j < first + split.sinks; ++j) keys.push_back(j);
    for (int j = end - split.recent; j < end; ++j) keys.push_back(j);
    // Each head's best keys between the sinks and the window, in rank order; then their union, rank by rank.
    std::vector<std::vector<int32_t>> ranked(n_heads);
    for (int h = 0; h < n_heads; ++h)
        ranked[h] = top_keys_by_score(scores + static_cast<size_t>(h) * row_stride, first + split.sinks,
                                      end - split.recent, split.by_score);
    std::vector<bool> taken(static_cast<size_t>(std::max(0, end - first)), false);
    int added = 0;
    for (int rank = 0; rank < split.by_score && added < split.by_score; ++rank) {
        for (int h = 0; h < n_heads && added < split.by_score; ++h) {
            const int32_t j = ranked[h][rank];
            if (taken[j - first]) continue;
            taken[j - first] = true;
            keys.push_back(j);
            ++added;
        }
    }
    KASCADE_ASSERT(added == split.by_score);
    std::sort(keys.begin(), keys.end());
    return keys;
}

namespace {

/// The layer each layer reads its keys from (SharedSetAttention's source), after checking the options.
std::vector<int> lessismore_sources(int n_layers, const LessIsMoreOptions& options) {
    KASCADE_CHECK(options.tile >= 1, "LessIsMore tile {} is invalid (must be at least 1 key)", options.tile);
    KASCADE_CHECK(options.sink_tokens >= 0, "LessIsMore sink tokens {} is invalid (must be >= 0)", options.sink_tokens);
    check_lessismore_options(options.selection_layers, options.window_ratio, n_layers, "selection-layers",
                             "window-ratio");
    std::vector<int> source(n_layers, -1);
    int last_selection = -1;
    for (int l = 0; l < n_layers; ++l) {
        if (std::find(options.selection_layers.begin(), options.selection_layers.end(), l) !=
            options.selection_layers.end()) {
            last_selection = l;
        }
        source[l] = last_selection;
    }
    return source;
}

}  // namespace

LessIsMoreAttention::LessIsMoreAttention(int n_layers, const LessIsMoreOptions& options)
    : SharedSetAttention(lessismore_sources(n_layers, options), RunLayerRole::Selection, options.tile, options.topk),
      window_ratio_(options.window_ratio),
      sink_tokens_(options.sink_tokens) {}

std::vector<int32_t> LessIsMoreAttention::pick_keys(const AttentionCall& call, int first, int end, int budget) {
    const AttnShape& shape = call.shape;
    scores_.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_k);
    decode_head_scores(shape, call.q, call.k, scores_.data());
    return lessismore_selection(scores_.data(), shape.n_q_heads, shape.n_k, first, end, budget, window_ratio_,
                                sink_tokens_);
}

}  // namespace kascade
