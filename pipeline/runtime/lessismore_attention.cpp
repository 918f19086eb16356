// pipeline/runtime/lessismore_attention.cpp: the LessIsMore decode policy.
#include "pipeline/runtime/lessismore_attention.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/decode_head_scores.h"
#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "pipeline/runtime/kascade_attention.h"

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

LessIsMoreAttention::LessIsMoreAttention(int n_layers, LessIsMoreOptions options)
    : options_(std::move(options)),
      roles_(n_layers, Role::Dense),
      source_(n_layers, -1),
      sets_(n_layers),
      density_(n_layers) {
    KASCADE_CHECK(options_.tile >= 1, "LessIsMore tile {} is invalid (must be at least 1 key)", options_.tile);
    KASCADE_CHECK(options_.sink_tokens >= 0, "LessIsMore sink tokens {} is invalid (must be >= 0)",
                  options_.sink_tokens);
    check_lessismore_options(options_.selection_layers, options_.window_ratio, n_layers, "selection-layers",
                             "window-ratio");
    int last_selection = -1;
    for (int l = 0; l < n_layers; ++l) {
        if (std::find(options_.selection_layers.begin(), options_.selection_layers.end(), l) !=
            options_.selection_layers.end()) {
            roles_[l] = Role::Selection;
            last_selection = l;
        } else if (last_selection >= 0) {
            roles_[l] = Role::Reuse;
            source_[l] = last_selection;
        }
    }
}

RunLayerRole LessIsMoreAttention::layer_role(int layer) const {
    switch (roles_[layer]) {
        case Role::Selection:
            return RunLayerRole::Selection;
        case Role::Reuse:
            return RunLayerRole::Reuse;
        case Role::Dense:
            break;
    }
    return RunLayerRole::Dense;
}

void LessIsMoreAttention::reset_density() {
    density_.assign(density_.size(), LayerDensity{});
}

void LessIsMoreAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    check_sparse_call(shape);
    const int l = call.layer;
    if (shape.n_q > 1) {
        attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
        density_[l].add(dense_prefill_density(shape));
        return;
    }
    if (roles_[l] == Role::Reuse) {
        SharedKeySet& set = sets_[source_[l]];
        set.attend(shape, call.q, call.k, call.v, call.out);
        density_[l].add(set.density(shape));
        return;
    }
    attn_dense_decode(shape, call.q, call.k, call.v, call.out);
    density_[l].add(dense_decode_density(shape));
    if (roles_[l] != Role::Selection) return;
    scores_.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_k);
    decode_head_scores(shape, call.q, call.k, scores_.data());
    const int window = shape.effective_window();
    const int first = decode_first_key(shape.n_k, window);
    const int end = (shape.n_k - 1) / options_.tile * options_.tile;
    const int budget = decode_token_budget(options_.topk, options_.tile, shape.n_k, window);
    sets_[l].assign(lessismore_selection(scores_.data(), shape.n_q_heads, shape.n_k, first, end, budget,
                                         options_.window_ratio, options_.sink_tokens),
                    options_.tile);
}

}  // namespace kascade
