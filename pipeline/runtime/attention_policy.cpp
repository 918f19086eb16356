#include "pipeline/runtime/attention_policy.h"

#include "kernels/dense_attention.h"

namespace kascade {

void DenseAttention::attend(const AttentionCall& call) {
    if (call.shape.n_q == 1) {
        attn_dense_decode(call.shape, call.q, call.k, call.v, call.out);
    } else {
        attn_dense_prefill(call.shape, call.q, call.k, call.v, call.out);
    }
}

}  // namespace kascade
