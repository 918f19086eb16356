// kernels/elementwise_parallel.h: when the row-wise and element-wise kernels (rmsnorm, rope, swiglu) share their work
// among threads.
#pragma once

#include <cstdint>

namespace kascade {

/// Elements from which the threads share the work; below, a parallel region costs more than it saves (and stalls
/// when the other cores are busy): a decode step's 1536-element activation takes about a microsecond on one core.
constexpr int64_t kParallelMinElements = 1 << 16;

}  // namespace kascade
