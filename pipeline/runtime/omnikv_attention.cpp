// pipeline/runtime/omnikv_attention.cpp: the OmniKV decode policy.
#include "pipeline/runtime/omnikv_attention.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "base/error.h"
#include "kernels/decode_head_scores.h"
#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "pipeline/runtime/kascade_attention.h"

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

OmniKvAttention::OmniKvAttention(int n_layers, OmniKvOptions options)
    : options_(std::move(options)),
      roles_(n_layers, Role::Dense),
      source_(n_layers, -1),
      sets_(n_layers),
      density_(n_layers) {
    KASCADE_CHECK(options_.tile >= 1, "OmniKV tile {} is invalid (must be at least 1 key)", options_.tile);
    check_omnikv_filter_layers(options_.filter_layers, n_layers, "filter-layers", options_.dense_layers);
    int last_filter = -1;
    for (int l = 0; l < n_layers; ++l) {
        if (std::find(options_.filter_layers.begin(), options_.filter_layers.end(), l) !=
            options_.filter_layers.end()) {
            roles_[l] = Role::Filter;
            last_filter = l;
        } else if (last_filter >= 0 && l > last_filter + 1) {
            roles_[l] = Role::Reuse;
            source_[l] = last_filter;
        }
    }
}

RunLayerRole OmniKvAttention::layer_role(int layer) const {
    switch (roles_[layer]) {
        case Role::Filter:
            return RunLayerRole::Filter;
        case Role::Reuse:
            return RunLayerRole::Reuse;
        case Role::Dense:
            break;
    }
    return RunLayerRole::Dense;
}

void OmniKvAttention::reset_density() {
    density_.assign(density_.size(), LayerDensity{});
}

void OmniKvAttention::attend(const AttentionCall& call) {
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
    if (roles_[l] != Role::Filter) return;
    // The new token's probabilities over every key it sees, maximised over all query heads (the reference's
    // amax over dim 1), rank the keys before its tile.
    probabilities_.resize(static_cast<size_t>(shape.n_q_heads) * shape.n_k);
    decode_head_probabilities(shape, call.q, call.k, probabilities_.data());
    for (int h = 1; h < shape.n_q_heads; ++h) {
        const float* row = probabilities_.data() + static_cast<size_t>(h) * shape.n_k;
        for (int j = 0; j < shape.n_k; ++j) probabilities_[j] = std::max(probabilities_[j], row[j]);
    }
    const int window = shape.effective_window();
    const int first = decode_first_key(shape.n_k, window);
    const int end = (shape.n_k - 1) / options_.tile * options_.tile;
    const int budget = decode_token_budget(options_.topk, options_.tile, shape.n_k, window);
    sets_[l].assign(top_keys_by_score(probabilities_.data(), first, end, budget), options_.tile);
}

}  // namespace kascade
