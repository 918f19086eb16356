// pipeline/runtime/output_error_probe.h: wraps a sparse policy and measures, per layer, how far its attention
// output is from exact attention on the same Q, K, V: ||out - out_dense|| / ||out_dense||. Costs one extra dense
// attention per layer, so evaluations run it on one window, outside the timed pass.
#pragma once

#include <vector>

#include "pipeline/runtime/attention_policy.h"

namespace kascade {

class OutputErrorProbe : public AttentionPolicy {
  public:
    OutputErrorProbe(AttentionPolicy& inner, int n_layers);

    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int layer) const override { return inner_.layer_role(layer); }

    double relative_error(int layer) const;

  private:
    AttentionPolicy& inner_;
    DenseAttention dense_;
    std::vector<double> diff_sq_, ref_sq_;
    std::vector<float> reference_;
};

}  // namespace kascade
