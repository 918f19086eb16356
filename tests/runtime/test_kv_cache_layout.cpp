// tests/runtime/test_kv_cache_layout.cpp: the KV cache's rows start on 64-byte cache lines (base/cache_aligned.h), in
// both dtypes and every layer, so a decode that reads scattered rows touches two lines per 128-byte BF16 row, not
// three.
#include <gtest/gtest.h>

#include <cstdint>

#include "pipeline/runtime/kv_cache.h"

namespace kascade {
namespace {

TEST(KvCacheLayout, EveryRowOfEveryLayerStartsOnACacheLine) {
    ModelConfig c;
    c.n_layers = 3;
    c.n_kv_heads = 2;
    c.head_dim = 64;  // 128-byte BF16 rows, 256-byte fp32 rows: whole cache lines
    for (KvDType dtype : {KvDType::F32, KvDType::BF16}) {
        // Odd capacities make every layer's buffer a size the default allocator would not round to a line.
        for (int capacity : {1, 37, 1001}) {
            const KvCache cache(c, capacity, 0, dtype);
            for (int l = 0; l < c.n_layers; ++l) {
                for (const KvPtr p : {cache.keys(l), cache.values(l)}) {
                    const auto address = reinterpret_cast<std::uintptr_t>(
                        dtype == KvDType::F32 ? static_cast<const void*>(p.f32()) : static_cast<const void*>(p.bf16()));
                    EXPECT_EQ(address % 64, 0u) << mode_name(dtype) << " capacity " << capacity << " layer " << l;
                }
            }
        }
    }
}

}  // namespace
}  // namespace kascade
