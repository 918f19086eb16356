// pipeline/runtime/attention_policy.h: how a layer attends. The transformer computes Q/K/V and hands each layer's
// attention to a policy; dense, Kascade (anchor/reuse), oracle top-k and streaming policies plug in here.
#pragma once

#include <string_view>
#include <vector>

#include "kernels/attention_types.h"
#include "kernels/quest.h"
#include "pipeline/runtime/attention_density.h"

namespace kascade {

/// One layer's attention: q and out token-major, k and v the layer's whole KV cache (head-major), see
/// kernels/attention_types.h. shape.n_q == shape.n_k for a prefill from position 0, n_q == 1 for decode (the query
/// at position n_k - 1 against the whole cache); sparse policies reject any other shape.
struct AttentionCall {
    int layer = 0;
    AttnShape shape;
    const float* q = nullptr;
    KvPtr k = nullptr;  ///< fp32 or BF16, as the cache stores them (--kv-dtype)
    KvPtr v = nullptr;
    float* out = nullptr;
    KeyPageBounds pages;  ///< the cache's page bounds of this layer (pages.page == 0: the cache keeps none)
};

class AttentionPolicy {
  public:
    virtual ~AttentionPolicy() = default;

    virtual void attend(const AttentionCall& call) = 0;

    /// Page size the KV cache must keep page bounds for (KvCache(config, capacity, policy.kv_page_size())); 0 = none.
    virtual int kv_page_size() const { return 0; }

    /// What `layer` does (run_layers.role), also used to split attention time by layer type.
    virtual RunLayerRole layer_role(int layer) const = 0;

    /// Called after a layer's attention block with its input x_in (the residual stream) and the block's output
    /// (after o_proj), both [n_rows][dim], when observes_layers() is true. The capture stage measures layer
    /// importance here.
    virtual bool observes_layers() const { return false; }
    virtual void observe_layer(int /*layer*/, const float* /*x_in*/, const float* /*attn_out*/, int /*n_rows*/,
                               int /*dim*/) {}

    /// Keys attended per layer since construction or the last reset_density() (run_layers.density); empty for a
    /// policy that attends every key (density 1).
    const std::vector<LayerDensity>& layer_density() const { return density_; }
    void reset_density() { density_.assign(density_.size(), LayerDensity{}); }

  protected:
    AttentionPolicy() = default;
    /// A sparse policy counts the keys its n_layers layers attend (add_density).
    explicit AttentionPolicy(int n_layers) : density_(n_layers) {}
    void add_density(int layer, const LayerDensity& d) { density_[layer].add(d); }

  private:
    std::vector<LayerDensity> density_;
};

/// Exact causal attention in every layer: the baseline every sparse result is compared with.
class DenseAttention : public AttentionPolicy {
  public:
    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int) const override { return RunLayerRole::Dense; }
};

}  // namespace kascade
