#include "pipeline/runtime/output_error_probe.h"

#include <cmath>

namespace kascade {

OutputErrorProbe::OutputErrorProbe(AttentionPolicy& inner, int n_layers)
    : inner_(inner), diff_sq_(n_layers, 0.0), ref_sq_(n_layers, 0.0) {}

void OutputErrorProbe::attend(const AttentionCall& call) {
    inner_.attend(call);
    const size_t n = static_cast<size_t>(call.shape.n_q) * call.shape.q_row_stride();
    reference_.resize(n);
    AttentionCall dense_call = call;
    dense_call.out = reference_.data();
    dense_.attend(dense_call);
    double diff = 0, ref = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = static_cast<double>(call.out[i]) - reference_[i];
        diff += d * d;
        ref += static_cast<double>(reference_[i]) * reference_[i];
    }
    diff_sq_[call.layer] += diff;
    ref_sq_[call.layer] += ref;
}

double OutputErrorProbe::relative_error(int layer) const {
    return ref_sq_[layer] > 0 ? std::sqrt(diff_sq_[layer] / ref_sq_[layer]) : 0.0;
}

}  // namespace kascade
