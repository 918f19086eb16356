// pipeline/runtime/transformer.h: the Llama-family forward pass (Hugging Face semantics).
//
//   x = embed[token]
//   per layer: h = RMSNorm(x); q,k,v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv); RoPE(q, k);
//              x += Attention(q, cache k, cache v) Wo^T;  x += W_down (silu(RMSNorm(x) W_gate^T) * RMSNorm(x) W_up^T)
//   final RMSNorm; logits = x W_lm^T
// Attention goes through an AttentionPolicy, so sparse methods change only that step.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "io/weights/model_weights.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "pipeline/runtime/attention_policy.h"
#include "pipeline/runtime/forward_stats.h"
#include "pipeline/runtime/kv_cache.h"

namespace kascade {

/// One sequence's share of a batched forward pass: its new tokens, the cache they extend, the policy it attends with.
struct ForwardSequence {
    std::span<const int32_t> tokens;
    KvCache* cache = nullptr;
    AttentionPolicy* policy = nullptr;
};

class Transformer {
  public:
    /// `weights` must outlive the transformer. max_positions bounds the positions a KV cache may use
    /// (default: the model's max_seq_len). precision: how the matrix products treat activations (kernels/matmul.h;
    /// Exact by default, Bf16 rounds them to BF16 for BF16 weights: faster, llama.cpp's numerics).
    explicit Transformer(const ModelWeights& weights, int max_positions = 0,
                         MatmulPrecision precision = MatmulPrecision::Exact);

    const ModelConfig& config() const { return weights_.config; }
    const std::filesystem::path& source() const { return weights_.source; }
    int max_positions() const { return rope_.max_positions; }

    /// Runs `tokens` at positions cache.length() ... through the model, appends their keys and values to `cache`,
    /// and writes the final-normed hidden state of each token to hidden_out ([tokens.size()][dim]).
    /// stats (optional) accumulates timings. The activations live in buffers the transformer keeps between calls
    /// (a decode step allocates nothing), so one transformer runs one forward at a time (checked).
    void forward(std::span<const int32_t> tokens, KvCache& cache, AttentionPolicy& policy, float* hidden_out,
                 ForwardStats* stats = nullptr) const;

    /// Batched forward: several sequences in one pass (a batched decode step gives each one token). The matrix
    /// products take the rows of every sequence at once, so the weights are read once per step instead of once per
    /// sequence; RoPE, the cache write and attention run per sequence, on its own cache through its own policy
    /// (policies keep per-sequence state between layers: give each sequence its own). hidden_out holds the rows of
    /// the sequences in order. Each sequence's result equals forward() of it alone, bit for bit (the products do not
    /// depend on the number of rows, kernels/matmul.h).
    void forward(std::span<const ForwardSequence> sequences, float* hidden_out, ForwardStats* stats = nullptr) const;

    /// logits [n][vocab] = hidden [n][dim] W_lm^T.
    void lm_head(const float* hidden, int n, float* logits, ForwardStats* stats = nullptr) const;

  private:
    /// One layer's attention for every sequence of a forward pass (its q rows roped, its keys and values in the
    /// caches), each through its own policy into the att rows. With at least as many sequences as threads (a batched
    /// decode step) each thread attends whole sequences, their kernels running on that thread alone: one parallel
    /// region per layer instead of one or more per sequence, whose starts and barriers had cost a batch-8 decode step
    /// at 32K keys a quarter of its reuse layers' time (2 threads, bench/README.md). Fewer sequences each split their
    /// attention over the threads, as a single sequence does. The kernels' results do not depend on their thread
    /// count, so every sequence's output is bit for bit that of forward() of it alone either way.
    void attend_sequences(std::span<const ForwardSequence> sequences, const std::vector<int>& row0, int layer) const;

    /// The activations of one forward pass, [rows][...] each, grown to the longest call so far.
    struct Activations {
        int rows = 0;
        std::vector<float> x, h, block_out, q, k, v, att, gate, up;
        void reserve(const ModelConfig& c, int n);
    };

    const ModelWeights& weights_;
    MatmulPrecision precision_;
    RopeTable rope_;
    mutable Activations activations_;
    mutable std::atomic<bool> in_forward_{false};
};

}  // namespace kascade
