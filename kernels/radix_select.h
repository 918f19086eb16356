// kernels/radix_select.h: the k largest of n floats by a radix select, as the decode top-k takes them from a score row
// of every cached key (tens of thousands of keys per KV head and step).
#pragma once

#include <cstdint>

namespace kascade {

/// Writes to ids, ascending, base + i for the `budget` largest values x[i], i < n, and returns how many: min(budget,
/// n), 0 when budget <= 0. Larger values first, equal values by the lower index (a strict total order, so the set is
/// deterministic); NaN ranks below every number and -0 equals +0. scratch: 2 * n uint32_t values.
int select_largest(const float* x, int n, int budget, int base, uint32_t* scratch, int32_t* ids);

}  // namespace kascade
