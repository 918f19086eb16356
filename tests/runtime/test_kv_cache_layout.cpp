// tests/runtime/test_kv_cache_layout.cpp: the KV cache's rows start on 64-byte cache lines (base/cache_aligned.h), in
// both dtypes and every layer, so a decode that reads scattered rows touches two lines per 128-byte BF16 row, not
// three; a layer of 2 MiB or more starts on a 2 MiB boundary, where a transparent huge page can back it.
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

TEST(KvCacheLayout, ALayerOfTwoMebibytesOrMoreStartsOnAHugePageBoundary) {
    ModelConfig c;
    c.n_layers = 2;
    c.n_kv_heads = 2;
    c.head_dim = 64;  // 256 bytes per BF16 position, 512 per fp32 position
    constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
    for (KvDType dtype : {KvDType::F32, KvDType::BF16}) {
        const int bytes_per_position = dtype == KvDType::F32 ? 512 : 256;
        // One position past 2 MiB: a size no allocator rounds to a huge page by itself.
        const int capacity = static_cast<int>(kHugePage) / bytes_per_position + 1;
        KvCache cache(c, capacity, 0, dtype);
        for (int l = 0; l < c.n_layers; ++l) {
            for (const KvPtr p : {cache.keys(l), cache.values(l)}) {
                const auto address = reinterpret_cast<std::uintptr_t>(
                    dtype == KvDType::F32 ? static_cast<const void*>(p.f32()) : static_cast<const void*>(p.bf16()));
                EXPECT_EQ(address % kHugePage, 0u) << mode_name(dtype) << " layer " << l;
            }
        }
    }
}

}  // namespace
}  // namespace kascade
