#include "kernels/kv_ptr.h"

#include <algorithm>

#include "kernels/attention_simd.h"

namespace kascade {

void kv_to_float(KvPtr src, int64_t n, float* dst) {
    if (src.dtype() == KvDType::F32) {
        std::copy_n(src.f32(), n, dst);
        return;
    }
    const uint16_t* h = src.bf16();
    int64_t i = 0;
    for (; i + detail::kLanes <= n; i += detail::kLanes) detail::v_store(dst + i, detail::v_load(h + i));
    for (; i < n; ++i) dst[i] = float_from_bf16(h[i]);
}

}  // namespace kascade
