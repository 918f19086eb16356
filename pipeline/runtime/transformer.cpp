#include "pipeline/runtime/transformer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

#include "base/error.h"
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

/// Marks a flag for the duration of a scope; a second holder at the same time is a bug.
class ExclusiveUse {
  public:
    explicit ExclusiveUse(std::atomic<bool>& flag) : flag_(flag) { KASCADE_ASSERT(!flag_.exchange(true)); }
    ~ExclusiveUse() { flag_.store(false); }
    ExclusiveUse(const ExclusiveUse&) = delete;
    ExclusiveUse& operator=(const ExclusiveUse&) = delete;

  private:
    std::atomic<bool>& flag_;
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

void Transformer::Activations::reserve(const ModelConfig& c, int n) {
    if (n <= rows) return;
    rows = n;
    const size_t r = static_cast<size_t>(n);
    for (std::vector<float>* buffer : {&x, &h, &block_out}) buffer->resize(r * c.dim);
    for (std::vector<float>* buffer : {&q, &att}) buffer->resize(r * c.n_heads * c.head_dim);
    for (std::vector<float>* buffer : {&k, &v}) buffer->resize(r * c.n_kv_heads * c.head_dim);
    for (std::vector<float>* buffer : {&gate, &up}) buffer->resize(r * c.hidden_dim);
}

void Transformer::forward(std::span<const int32_t> tokens, KvCache& cache, AttentionPolicy& policy, float* hidden_out,
                          ForwardStats* stats) const {
    const ForwardSequence sequence{tokens, &cache, &policy};
    forward(std::span(&sequence, 1), hidden_out, stats);
}

void Transformer::forward(std::span<const ForwardSequence> sequences, float* hidden_out, ForwardStats* stats) const {
    const ModelConfig& c = weights_.config;
    KASCADE_CHECK(!sequences.empty(), "forward pass needs at least one sequence");
    // Row offsets of the sequences in the activations, and the checks, before anything is written.
    std::vector<int> row0(sequences.size() + 1, 0);
    for (size_t i = 0; i < sequences.size(); ++i) {
        const ForwardSequence& s = sequences[i];
        KASCADE_ASSERT(s.cache != nullptr && s.policy != nullptr);
        for (size_t j = 0; j < i; ++j) KASCADE_ASSERT(sequences[j].cache != s.cache && sequences[j].policy != s.policy);
        const int n = static_cast<int>(s.tokens.size());
        const int pos0 = s.cache->length();
        KASCADE_CHECK(n > 0, "forward pass needs at least one token");
        KASCADE_CHECK(pos0 + n <= s.cache->capacity() && pos0 + n <= rope_.max_positions,
                      "sequence of {} positions does not fit: the model/cache allows {} (max_position_embeddings {})",
                      pos0 + n, std::min(s.cache->capacity(), rope_.max_positions), c.max_seq_len);
        for (int32_t t : s.tokens) {
            KASCADE_CHECK(t >= 0 && t < c.vocab_size, "token id {} is outside the model's vocabulary [0, {})", t,
                          c.vocab_size);
        }
        row0[i + 1] = row0[i] + n;
    }
    const int n = row0.back();
    const ExclusiveUse exclusive(in_forward_);  // the activation buffers are shared: one forward at a time

    ForwardStats local_stats;
    ForwardStats& st = stats != nullptr ? *stats : local_stats;
    if (st.layer_attention_ms.size() != static_cast<size_t>(c.n_layers)) st.layer_attention_ms.assign(c.n_layers, 0);
    ScopedTimer total_timer(&st.total_ms);

    const int dim = c.dim;
    const size_t rows = static_cast<size_t>(n);
    Activations& a = activations_;
    a.reserve(c, n);
    float* x = a.x.data();
    float* h = a.h.data();
    float* block_out = a.block_out.data();
    const size_t q_row = static_cast<size_t>(c.n_heads) * c.head_dim;
    const size_t kv_row = static_cast<size_t>(c.n_kv_heads) * c.head_dim;

    {
        ScopedTimer t(&st.embed_ms);
        for (size_t i = 0; i < sequences.size(); ++i) {
            for (int r = 0; r < static_cast<int>(sequences[i].tokens.size()); ++r) {
                weight_row_to_f32(weights_.embed, sequences[i].tokens[r], x + (row0[i] + r) * static_cast<size_t>(dim));
            }
        }
    }
    {
        ScopedTimer t(&st.norm_ms);
        rmsnorm(x, weights_.layers[0].attn_norm, h, n, dim, c.rms_norm_eps);
    }

    const bool interleaved = c.rope_layout == RopeLayout::Interleaved;
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& w = weights_.layers[l];
        // h = attn_norm(x) here (before layer 0 above, else at the end of the previous layer).
        {
            ScopedTimer t(&st.matmul_ms);
            const MatmulTarget qkv[] = {{matrix_view(w.wq), w.bq, a.q.data(), 0},
                                        {matrix_view(w.wk), w.bk, a.k.data(), 0},
                                        {matrix_view(w.wv), w.bv, a.v.data(), 0}};
            matmul(h, n, qkv, precision_);
        }
        if (w.q_norm != nullptr) {  // Qwen3: RMSNorm over each head's vector, before RoPE
            ScopedTimer t(&st.norm_ms);
            rmsnorm(a.q.data(), w.q_norm, a.q.data(), rows * c.n_heads, c.head_dim, c.rms_norm_eps);
            rmsnorm(a.k.data(), w.k_norm, a.k.data(), rows * c.n_kv_heads, c.head_dim, c.rms_norm_eps);
        }
        {
            ScopedTimer t(&st.rope_kv_ms);
            for (size_t i = 0; i < sequences.size(); ++i) {
                const int seq_rows = row0[i + 1] - row0[i];
                const int pos0 = sequences[i].cache->length();
                float* k = a.k.data() + row0[i] * kv_row;
                rope_apply(rope_, interleaved, a.q.data() + row0[i] * q_row, seq_rows, c.n_heads, pos0);
                rope_apply(rope_, interleaved, k, seq_rows, c.n_kv_heads, pos0);
                sequences[i].cache->write(l, k, a.v.data() + row0[i] * kv_row, seq_rows);
            }
        }
        {
            const double t0 = omp_get_wtime();
            attend_sequences(sequences, row0, l);
            const double ms = (omp_get_wtime() - t0) * 1e3;
            st.attention_ms += ms;
            st.layer_attention_ms[l] += ms;
        }
        {
            ScopedTimer t(&st.matmul_ms);
            matmul(a.att.data(), n, matrix_view(w.wo), w.bo, block_out, precision_);
        }
        for (size_t i = 0; i < sequences.size(); ++i) {
            AttentionPolicy& policy = *sequences[i].policy;
            const size_t at = row0[i] * static_cast<size_t>(dim);
            if (policy.observes_layers()) policy.observe_layer(l, x + at, block_out + at, row0[i + 1] - row0[i], dim);
        }
        {
            ScopedTimer t(&st.norm_ms);
            add_rmsnorm(x, block_out, w.mlp_norm, h, n, dim, c.rms_norm_eps);
        }
        {
            ScopedTimer t(&st.matmul_ms);
            const MatmulTarget gate_up[] = {{matrix_view(w.w_gate), nullptr, a.gate.data(), 0},
                                            {matrix_view(w.w_up), nullptr, a.up.data(), 0}};
            matmul(h, n, gate_up, precision_);
        }
        {
            ScopedTimer t(&st.activation_ms);
            swiglu(a.gate.data(), a.up.data(), a.gate.data(), static_cast<int64_t>(rows) * c.hidden_dim);
        }
        {
            ScopedTimer t(&st.matmul_ms);
            matmul(a.gate.data(), n, matrix_view(w.w_down), nullptr, block_out, precision_);
        }
        // The residual add, fused with the next norm: the next layer's attention norm, or the final norm into
        // hidden_out after the last layer.
        {
            ScopedTimer t(&st.norm_ms);
            const bool last = l + 1 == c.n_layers;
            add_rmsnorm(x, block_out, last ? weights_.final_norm : weights_.layers[l + 1].attn_norm,
                        last ? hidden_out : h, n, dim, c.rms_norm_eps);
        }
    }
    for (size_t i = 0; i < sequences.size(); ++i) sequences[i].cache->advance(row0[i + 1] - row0[i]);
    st.tokens += n;
}

void Transformer::attend_sequences(std::span<const ForwardSequence> sequences, const std::vector<int>& row0,
                                   int layer) const {
    const ModelConfig& c = weights_.config;
    const size_t q_row = static_cast<size_t>(c.n_heads) * c.head_dim;
    const int n_seq = static_cast<int>(sequences.size());
    const bool across = n_seq > 1 && n_seq >= omp_get_max_threads();
    std::vector<std::exception_ptr> errors(n_seq);  // exceptions must not leave an OpenMP region
#pragma omp parallel for schedule(dynamic, 1) if (across)
    for (int i = 0; i < n_seq; ++i) {
        if (across) omp_set_num_threads(1);  // this thread's share: the kernels' own parallel regions run on it alone
        const KvCache& cache = *sequences[i].cache;
        AttentionCall call;
        call.layer = layer;
        call.shape.n_q_heads = c.n_heads;
        call.shape.n_kv_heads = c.n_kv_heads;
        call.shape.head_dim = c.head_dim;
        call.shape.n_q = row0[i + 1] - row0[i];
        call.shape.n_k = cache.length() + call.shape.n_q;
        call.shape.kv_stride = cache.capacity();
        call.shape.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        call.shape.window = c.window(layer);
        call.shape.products = precision_;
        call.q = activations_.q.data() + row0[i] * q_row;
        call.k = cache.keys(layer);
        call.v = cache.values(layer);
        call.out = activations_.att.data() + row0[i] * q_row;
        call.pages = cache.page_bounds(layer);
        try {
            sequences[i].policy->attend(call);
        } catch (...) {
            errors[i] = std::current_exception();
        }
    }
    for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
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
