#include "pipeline/runtime/capture_attention.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/tile_mass.h"

namespace kascade {

CaptureAttention::CaptureAttention(int n_layers, int tile, bool save_qk)
    : tile_(tile),
      save_qk_(save_qk),
      mass_(n_layers),
      q_(n_layers),
      k_(n_layers),
      one_minus_cos_sum_(n_layers, 0.0),
      rows_seen_(n_layers, 0) {}

void CaptureAttention::attend(const AttentionCall& call) {
    const AttnShape& s = call.shape;
    KASCADE_CHECK(s.n_q == s.n_k, "capture runs prefill from position 0 only (got {} queries against {} keys)", s.n_q,
                  s.n_k);
    attn_dense_prefill_with_mass(s, tile_, call.q, call.k, call.v, call.out, &mass_[call.layer]);
    if (!save_qk_) return;
    q_[call.layer].assign(call.q, call.q + static_cast<size_t>(s.n_q) * s.n_q_heads * s.head_dim);
    std::vector<float>& k = k_[call.layer];
    k.resize(static_cast<size_t>(s.n_kv_heads) * s.n_k * s.head_dim);
    for (int h = 0; h < s.n_kv_heads; ++h) {
        kv_to_float(call.k + static_cast<int64_t>(h) * s.kv_stride * s.head_dim,
                    static_cast<int64_t>(s.n_k) * s.head_dim, k.data() + static_cast<size_t>(h) * s.n_k * s.head_dim);
    }
}

void CaptureAttention::observe_layer(int layer, const float* x_in, const float* attn_out, int n_rows, int dim) {
    double sum = 0;
    for (int r = 0; r < n_rows; ++r) {
        const float* x = x_in + static_cast<size_t>(r) * dim;
        const float* a = attn_out + static_cast<size_t>(r) * dim;
        double dot = 0, norm_x = 0, norm_y = 0;
        for (int i = 0; i < dim; ++i) {
            const double y = static_cast<double>(x[i]) + a[i];
            dot += x[i] * y;
            norm_x += static_cast<double>(x[i]) * x[i];
            norm_y += y * y;
        }
        const double denom = std::sqrt(norm_x * norm_y);
        sum += 1.0 - (denom > 0 ? dot / denom : 1.0);
    }
    one_minus_cos_sum_[layer] += sum;
    rows_seen_[layer] += n_rows;
}

double CaptureAttention::importance(int layer) const {
    return rows_seen_[layer] > 0 ? one_minus_cos_sum_[layer] / rows_seen_[layer] : 0.0;
}

}  // namespace kascade
