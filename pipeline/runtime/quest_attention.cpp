#include "pipeline/runtime/quest_attention.h"

#include "base/error.h"
#include "kernels/dense_attention.h"
#include "kernels/quest.h"
#include "kernels/sparse_attention.h"
#include "pipeline/runtime/kascade_attention.h"

namespace kascade {

QuestAttention::QuestAttention(int n_layers, QuestOptions options)
    : AttentionPolicy(n_layers), options_(options), selections_(n_layers) {
    KASCADE_CHECK(options_.page > 0, "Quest page size {} is invalid (must be at least 1 key)", options_.page);
    KASCADE_CHECK(options_.dense_layers >= 0, "Quest dense layer count {} is invalid (must be >= 0)",
                  options_.dense_layers);
}

void QuestAttention::attend(const AttentionCall& call) {
    const AttnShape& shape = call.shape;
    check_sparse_call(shape);
    const int l = call.layer;
    if (shape.n_q > 1) {
        attn_dense_prefill(shape, call.q, call.k, call.v, call.out);
        add_density(l, dense_prefill_density(shape));
        return;
    }
    if (l < options_.dense_layers) {
        attn_dense_decode(shape, call.q, call.k, call.v, call.out);
        add_density(l, dense_decode_density(shape));
        return;
    }
    KASCADE_CHECK(call.pages.page == options_.page,
                  "Quest needs a KV cache with page bounds of {} keys (got page size {}): create it with "
                  "KvCache(config, capacity, policy.kv_page_size())",
                  options_.page, call.pages.page);
    quest_page_scores(shape, call.q, call.pages, &page_scores_);
    TileSelection& selection = selections_[l];
    select_decode_tiles(page_scores_, options_.topk, &scratch_, &selection);
    attn_sparse_decode(shape, options_.page, call.q, call.k, call.v, selection.tiles.data(), selection.count.data(),
                       selection.max_k, nullptr, call.out);
    add_density(l, sparse_decode_density(shape, options_.page, selection, nullptr));
}

}  // namespace kascade
