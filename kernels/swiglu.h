// kernels/swiglu.h: the gated MLP activation, h = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
#pragma once

#include <cstdint>

namespace kascade {

/// gate, up, out: n elements each; out may alias gate.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

}  // namespace kascade
