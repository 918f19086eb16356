#include "pipeline/runtime/transformer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "io/error.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
#include "pipeline/runtime/rope_frequencies.h"
#include "pipeline/runtime/weight_matrix_view.h"

namespace kascade {

namespace {

/// Adds the wall time of its scope to a counter.
class ScopedTimer {
  public:
    explicit ScopedTimer(double* counter_ms) : counter_ms_(counter_ms), start_(omp_get_wtime()) {}
    ~ScopedTimer() {
        if (counter_ms_ != nullptr) *counter_ms_ += (omp_get_wtime() - start_) * 1e3;
    }
    ScopedTimer(const ScopedTimer&) = delete;
    ScopedTimer& operator=(const ScopedTimer&) = delete;

  private:
    double* counter_ms_;
    double start_;
};

}  // namespace

Transformer::Transformer(const ModelWeights& weights, int max_positions, MatmulPrecision precision)
    : weights_(weights), precision_(precision) {
    const RopeFrequencies frequencies = rope_frequencies(weights.config);
    rope_ = rope_table(weights.config.head_dim, max_positions > 0 ? max_positions : weights.config.max_seq_len,
                       frequencies.inv_freq, frequencies.attention_factor);
    // The attention kernels work on 8-float SIMD lanes of a head; every Llama-family head size (64, 80, 96, 128)
    // is a multiple of 8.
    KASCADE_CHECK(weights.config.head_dim % 8 == 0,
                  "model \"{}\": head_dim {} is not supported (must be a multiple of 8)", weights.source.string(),
                  weights.config.head_dim);
}

void Transformer::forward(std::span<const int32_t> tokens, KvCache& cache, AttentionPolicy& policy, float* hidden_out,
                          ForwardStats* stats) const {
    const ModelConfig& c = weights_.config;
    const int n = static_cast<int>(tokens.size());
    const int pos0 = cache.length();
    KASCADE_CHECK(n > 0, "forward pass needs at least one token");
    KASCADE_CHECK(pos0 + n <= cache.capacity() && pos0 + n <= rope_.max_positions,
                  "sequence of {} positions does not fit: the model/cache allows {} (max_position_embeddings {})",
                  pos0 + n, std::min(cache.capacity(), rope_.max_positions), c.max_seq_len);
    for (int32_t t : tokens) {
        KASCADE_CHECK(t >= 0 && t < c.vocab_size, "token id {} is outside the model's vocabulary [0, {})", t,
                      c.vocab_size);
    }

    ForwardStats local_stats;
    ForwardStats& st = stats != nullptr ? *stats : local_stats;
    if (st.layer_attention_ms.size() != static_cast<size_t>(c.n_layers)) st.layer_attention_ms.assign(c.n_layers, 0);
    ScopedTimer total_timer(&st.total_ms);

    const int dim = c.dim;
    const int q_dim = c.n_heads * c.head_dim;
    const int kv_dim = c.n_kv_heads * c.head_dim;
    const size_t rows = static_cast<size_t>(n);
    std::vector<float> x(rows * dim), h(rows * dim), block_out(rows * dim);
    std::vector<float> q(rows * q_dim), k(rows * kv_dim), v(rows * kv_dim), att(rows * q_dim);
    std::vector<float> gate(rows * c.hidden_dim), up(rows * c.hidden_dim);

    for (int t = 0; t < n; ++t) {
        weight_row_to_f32(weights_.embed, tokens[t], x.data() + t * static_cast<size_t>(dim));
    }

    const bool interleaved = c.rope_layout == RopeLayout::Interleaved;
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& w = weights_.layers[l];
        rmsnorm(x.data(), w.attn_norm, h.data(), n, dim, c.rms_norm_eps);
        {
            ScopedTimer t(&st.matmul_ms);
            const MatmulTarget qkv[] = {{matrix_view(w.wq), w.bq, q.data(), 0},
                                        {matrix_view(w.wk), w.bk, k.data(), 0},
                                        {matrix_view(w.wv), w.bv, v.data(), 0}};
            matmul(h.data(), n, qkv, precision_);
        }
        if (w.q_norm != nullptr) {  // Qwen3: RMSNorm over each head's vector, before RoPE
            rmsnorm(q.data(), w.q_norm, q.data(), rows * c.n_heads, c.head_dim, c.rms_norm_eps);
            rmsnorm(k.data(), w.k_norm, k.data(), rows * c.n_kv_heads, c.head_dim, c.rms_norm_eps);
        }
        rope_apply(rope_, interleaved, q.data(), n, c.n_heads, pos0);
        rope_apply(rope_, interleaved, k.data(), n, c.n_kv_heads, pos0);
        cache.write(l, k.data(), v.data(), n);

        AttentionCall call;
        call.layer = l;
        call.shape.n_q_heads = c.n_heads;
        call.shape.n_kv_heads = c.n_kv_heads;
        call.shape.head_dim = c.head_dim;
        call.shape.n_q = n;
        call.shape.n_k = pos0 + n;
        call.shape.kv_stride = cache.capacity();
        call.shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        call.shape.window = c.window(l);
        call.q = q.data();
        call.k = cache.keys(l);
        call.v = cache.values(l);
        call.out = att.data();
        {
            const double t0 = omp_get_wtime();
            policy.attend(call);
            const double ms = (omp_get_wtime() - t0) * 1e3;
            st.attention_ms += ms;
            st.layer_attention_ms[l] += ms;
        }
        {
            ScopedTimer t(&st.matmul_ms);
            matmul(att.data(), n, matrix_view(w.wo), w.bo, block_out.data(), precision_);
        }
        if (policy.observes_layers()) policy.observe_layer(l, x.data(), block_out.data(), n, dim);
        for (size_t i = 0; i < rows * dim; ++i) x[i] += block_out[i];

        rmsnorm(x.data(), w.mlp_norm, h.data(), n, dim, c.rms_norm_eps);
        {
            ScopedTimer t(&st.matmul_ms);
            const MatmulTarget gate_up[] = {{matrix_view(w.w_gate), nullptr, gate.data(), 0},
                                            {matrix_view(w.w_up), nullptr, up.data(), 0}};
            matmul(h.data(), n, gate_up, precision_);
        }
        swiglu(gate.data(), up.data(), gate.data(), static_cast<int64_t>(rows) * c.hidden_dim);
        {
            ScopedTimer t(&st.matmul_ms);
            matmul(gate.data(), n, matrix_view(w.w_down), nullptr, block_out.data(), precision_);
        }
        for (size_t i = 0; i < rows * dim; ++i) x[i] += block_out[i];
    }
    cache.advance(n);
    rmsnorm(x.data(), weights_.final_norm, hidden_out, n, dim, c.rms_norm_eps);
    st.tokens += n;
}

void Transformer::lm_head(const float* hidden, int n, float* logits, ForwardStats* stats) const {
    double elapsed = 0;
    {
        ScopedTimer t(&elapsed);
        matmul(hidden, n, matrix_view(weights_.lm_head), nullptr, logits, precision_);
    }
    if (stats != nullptr) {
        stats->matmul_ms += elapsed;
        stats->total_ms += elapsed;
    }
}

}  // namespace kascade
