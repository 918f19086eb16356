// pipeline/runtime/shared_set_attention.cpp: the decode policy shared by OmniKV and LessIsMore.
#include "pipeline/runtime/shared_set_attention.h"

#include <utility>

#include "kernels/decode_scoring.h"
#include "kernels/dense_attention.h"
#include "pipeline/runtime/kascade_attention.h"

namespace kascade {

SharedSetAttention::SharedSetAttention(std::vector<int> source, RunLayerRole selecting_role, int tile, TopKRule topk)
    : AttentionPolicy(static_cast<int>(source.size())),
      source_(std::move(source)),
      selecting_role_(selecting_role),
      tile_(tile),
      topk_(topk),
      sets_(source_.size()) {}

RunLayerRole SharedSetAttention::layer_role(int layer) const {
    if (source_[layer] < 0) return RunLayerRole::Dense;
    return source_[layer] == layer ? selecting_role_ : RunLayerRole::Reuse;
}

void SharedSetAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    check_sparse_call(shape);
    const int l = call.layer;
    if (shape.n_q > 1) {
        attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
        add_density(l, dense_prefill_density(shape));
        return;
    }
    const int source = source_[l];
    if (source >= 0 && source != l) {
        SharedKeySet& set = sets_[source];
        set.attend(shape, call.q, call.k, call.v, call.out);
        add_density(l, set.density(shape));
        return;
    }
    attn_dense_decode(shape, call.q, call.k, call.v, call.out);
    add_density(l, dense_decode_density(shape));
    if (source != l) return;
    const int window = shape.effective_window();
    const int first = decode_first_key(shape.n_k, window);
    const int end = (shape.n_k - 1) / tile_ * tile_;
    const int budget = decode_token_budget(topk_, tile_, shape.n_k, window);
    sets_[l].assign(pick_keys(call, first, end, budget), tile_);
}

}  // namespace kascade
