// tests/common/attention_tolerance.h: the accuracy every attention kernel is held to (README, "Kernels").
#pragma once

namespace kascade {

/// Max abs error of an attention output, or of a pooled probability mass, against the double-precision reference.
constexpr double kAttentionTolerance = 2e-5;

}  // namespace kascade
