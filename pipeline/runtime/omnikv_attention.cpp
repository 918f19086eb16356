// pipeline/runtime/omnikv_attention.cpp: the OmniKV decode policy.
#include "pipeline/runtime/omnikv_attention.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/decode_head_scores.h"

namespace kascade {

void check_omnikv_filter_layers(const std::vector<int>& filter_layers, int n_layers, std::string_view option,
                                int dense_layers) {
    const std::string list = fmt::format("{}", fmt::join(filter_layers, ","));
    KASCADE_CHECK(!filter_layers.empty(),
                  "method omnikv needs its filter layers ({} L,L,...; the Kascade paper's for Llama-3.1-8B: 2,8,18)",
                  option);
    for (size_t i = 0; i < filter_layers.size(); ++i) {
        const int l = filter_layers[i];
        KASCADE_CHECK(l >= dense_layers && l < n_layers,
                      "invalid {}={}: layer {} must be in [{}, {}] (layers 0..{} attend densely, as in OmniKV's "
                      "reference; the model has {} layers)",
                      option, list, l, dense_layers, n_layers - 1, dense_layers - 1, n_layers);
        if (i == 0) continue;
        KASCADE_CHECK(l > filter_layers[i - 1], "invalid {}={}: the layers must be ascending", option, list);
        KASCADE_CHECK(l > filter_layers[i - 1] + 1,
                      "invalid {}={}: layers {} and {} are adjacent, but the layer after a filter layer attends "
                      "densely (as in OmniKV's reference), so {} would never filter",
                      option, list, filter_layers[i - 1], l, l);
    }
}

namespace {

/// The layer each layer reads its keys from (SharedSetAttention's source), after checking the options.
std::vector<int> omnikv_sources(int n_layers, const OmniKvOptions& options) {
    KASCADE_CHECK(options.tile >= 1, "OmniKV tile {} is invalid (must be at least 1 key)", options.tile);
    check_omnikv_filter_layers(options.filter_layers, n_layers, "filter-layers", options.dense_layers);
    std::vector<int> source(n_layers, -1);
    int last_filter = -1;
    for (int l = 0; l < n_layers; ++l) {
        if (std::find(options.filter_layers.begin(), options.filter_layers.end(), l) != options.filter_layers.end()) {
            source[l] = last_filter = l;
        } else if (last_filter >= 0 && l > last_filter + 1) {
            source[l] = last_filter;
        }
    }
    return source;
}

}  // namespace

OmniKvAttention::OmniKvAttention(int n_layers, const OmniKvOptions& options)
    : SharedSetAttention(omnikv_sources(n_layers, options), RunLayerRole::Filter, options.tile, options.topk) {}

std::vector<int32_t> OmniKvAttention::pick_keys(const AttentionCall& call, int first, int end, int budget) {
    const AttnShape& shape = call.shape;
    // The new token's probabilities over every key it sees, maximised over all query heads (the reference's
    // amax over dim 1), rank the keys before its tile.
    probabilities_.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_k);
    decode_head_probabilities(shape, call.q, call.k, probabilities_.data());
    for (int h = 1; h < shape.n_q_heads; ++h) {
        const float* row = probabilities_.data() + static_cast<size_t>(h) * shape.n_k;
        for (int j = 0; j < shape.n_k; ++j) probabilities_[j] = std::max(probabilities_[j], row[j]);
    }
    return top_keys_by_score(probabilities_.data(), first, end, budget);
}

}  // namespace kascade
