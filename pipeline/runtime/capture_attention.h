// pipeline/runtime/capture_attention.h: dense attention that also records what the capture stage stores: each
// layer's pooled post-softmax tile mass, its importance, and optionally the post-RoPE queries and keys.
#pragma once

#include <vector>

#include "pipeline/runtime/attention_policy.h"

namespace kascade {

class CaptureAttention : public AttentionPolicy {
  public:
    CaptureAttention(int n_layers, int tile, bool save_qk);

    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int) const override { return RunLayerRole::Dense; }
    bool observes_layers() const override { return true; }
    void observe_layer(int layer, const float* x_in, const float* attn_out, int n_rows, int dim) override;

    /// Of the last forward pass (one window):
    const TileMass& tile_mass(int layer) const { return mass_[layer]; }
    const std::vector<float>& queries(int layer) const { return q_[layer]; }  ///< [n][n_q_heads][head_dim]
    const std::vector<float>& keys(int layer) const { return k_[layer]; }     ///< [n_kv_heads][n][head_dim]

    /// Layer importance 1 - mean over rows of cos(x_in, x_in + attn_out), over every window seen so far.
    double importance(int layer) const;

  private:
    int tile_;
    bool save_qk_;
    std::vector<TileMass> mass_;
    std::vector<std::vector<float>> q_, k_;
    std::vector<double> one_minus_cos_sum_;
    std::vector<int64_t> rows_seen_;
};

}  // namespace kascade
