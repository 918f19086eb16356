// tests/weights/dtype_test.cpp: BF16/F16 <-> fp32 conversion against hand-computed values, exhaustive round trips,
// and the bulk (parallel, unaligned) converters against the scalar ones.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "io/weights/dtype.h"

namespace kascade {
namespace {

TEST(Dtype, Bf16ToF32HandComputed) {
    EXPECT_EQ(float_from_bf16(0x3F80), 1.0f);
    EXPECT_EQ(float_from_bf16(0xC000), -2.0f);
    EXPECT_EQ(float_from_bf16(0x3EAA), 0.33203125f);               // 1.0101010b x 2^-2
    EXPECT_EQ(float_from_bf16(0x0001), std::ldexp(1.0f, -133));    // smallest subnormal
    EXPECT_EQ(float_from_bf16(0x007F), std::ldexp(127.0f, -133));  // largest subnormal
    EXPECT_EQ(float_from_bf16(0x7F7F), std::ldexp(255.0f, 120));   // largest finite
    EXPECT_EQ(float_from_bf16(0x7F80), std::numeric_limits<float>::infinity());
    EXPECT_EQ(float_from_bf16(0xFF80), -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(float_from_bf16(0x7FC0)));
    EXPECT_TRUE(std::isnan(float_from_bf16(0xFF81)));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(float_from_bf16(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(Dtype, F16ToF32HandComputed) {
    EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
    EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
    EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
    EXPECT_EQ(f16_to_f32(0x0001), 5.9604644775390625e-8f);  // 2^-24, smallest subnormal
    EXPECT_EQ(f16_to_f32(0x8001), -5.9604644775390625e-8f);
    EXPECT_EQ(f16_to_f32(0x03FF), 1023.0f * 5.9604644775390625e-8f);  // largest subnormal
    EXPECT_EQ(f16_to_f32(0x0400), 6.103515625e-5f);                   // 2^-14, smallest normal
    EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);                          // largest finite
    EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
    EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
    EXPECT_EQ(std::bit_cast<std::uint32_t>(f16_to_f32(0x8000)), 0x80000000u);
}

TEST(Dtype, F32ToBf16RoundsToNearestEven) {
    EXPECT_EQ(bf16_from_float(1.0f), 0x3F80);
    EXPECT_EQ(bf16_from_float(-2.0f), 0xC000);
    EXPECT_EQ(bf16_from_float(1.0f + std::ldexp(1.0f, -8)), 0x3F80);                          // tie: down to even
    EXPECT_EQ(bf16_from_float(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);                      // tie: up to even
    EXPECT_EQ(bf16_from_float(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3F81);  // above the tie
    EXPECT_EQ(bf16_from_float(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf, as PyTorch does
    EXPECT_EQ(bf16_from_float(-std::numeric_limits<float>::infinity()), 0xFF80);
    EXPECT_TRUE(std::isnan(float_from_bf16(bf16_from_float(std::numeric_limits<float>::quiet_NaN()))));
    // A NaN whose payload sits only in the low 16 bits must not become inf.
    EXPECT_TRUE(std::isnan(float_from_bf16(bf16_from_float(std::bit_cast<float>(0x7F800001u)))));
}

TEST(Dtype, F32ToF16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
    EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
    EXPECT_EQ(f32_to_f16(1.0f / 3.0f), 0x3555);
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);  // below the tie with 65536
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // the tie rounds to even, i.e. to inf
    EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);     // tie between 0 and 2^-24: to even (0)
    EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);     // above the tie
    EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);     // tie between 1 and 2 units: to even (2)
    EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounding carries into the exponent
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
    EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: down to even
    EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
    EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7C00);
    EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0x7F800001u)))));
}

TEST(Dtype, EveryNonNanHalfValueRoundTrips) {
    for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
        const auto h = static_cast<std::uint16_t>(bits);
        if (!std::isnan(f16_to_f32(h))) {
            ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << "F16 0x" << std::hex << bits;
        }
        if (!std::isnan(float_from_bf16(h))) {
            ASSERT_EQ(bf16_from_float(float_from_bf16(h)), h) << "BF16 0x" << std::hex << bits;
        }
    }
}

TEST(Dtype, BulkConversionMatchesScalarAtAnyAlignment) {
    constexpr std::size_t n = 100003;  // above the parallel threshold, odd
    std::vector<std::uint8_t> raw(2 * n + 1);
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 7);
    const std::uint8_t* src = raw.data() + 1;  // deliberately misaligned
    std::vector<float> out(n);
    for (DType dtype : {DType::BF16, DType::F16}) {
        convert_to_f32(dtype, src, out.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t bits;
            std::memcpy(&bits, src + 2 * i, 2);
            const float expected = dtype == DType::BF16 ? float_from_bf16(bits) : f16_to_f32(bits);
            ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(expected))
                << dtype_name(dtype) << " element " << i;
        }
        std::vector<std::uint8_t> back(2 * n + 1);
        convert_from_f32(dtype, out.data(), back.data() + 1, n);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint16_t bits;
            std::memcpy(&bits, back.data() + 1 + 2 * i, 2);
            const std::uint16_t expected = dtype == DType::BF16 ? bf16_from_float(out[i]) : f32_to_f16(out[i]);
            ASSERT_EQ(bits, expected) << dtype_name(dtype) << " element " << i;
        }
    }
}

/// The reference for first_non_finite: the first element whose fp32 value std::isfinite rejects, or n.
std::size_t first_non_finite_by_value(DType dtype, const std::uint8_t* src, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, src + i * dtype_size(dtype), dtype_size(dtype));
        const float value = dtype == DType::F32    ? std::bit_cast<float>(bits)
                            : dtype == DType::BF16 ? float_from_bf16(static_cast<std::uint16_t>(bits))
                                                   : f16_to_f32(static_cast<std::uint16_t>(bits));
        if (!std::isfinite(value)) return i;
    }
    return n;
}

TEST(Dtype, FirstNonFiniteIsTheFirstNanOrInfinityAtAnyPosition) {
    // Three scan chunks and a tail (the scan's chunks are 65536 elements, its blocks 256), misaligned by a byte.
    constexpr std::size_t n = 3 * 65536 + 777;
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
        const std::size_t width = dtype_size(dtype);
        std::vector<std::uint8_t> raw(n * width + 1);
        std::uint8_t* src = raw.data() + 1;
        std::vector<float> values(n);
        for (std::size_t i = 0; i < n; ++i) values[i] = std::ldexp(static_cast<float>(i % 1000) - 500.0f, -7);
        convert_from_f32(dtype, values.data(), src, n);
        EXPECT_EQ(first_non_finite(dtype, src, n), n) << dtype_name(dtype);
        const float kinds[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
        // One bad value at a block or chunk edge, then a second one later: the first is reported.
        for (std::size_t at : {std::size_t{0}, std::size_t{255}, std::size_t{256}, std::size_t{65535},
                               std::size_t{65536}, std::size_t{2 * 65536 + 300}, n - 1}) {
            for (float bad : kinds) {
                std::vector<std::uint8_t> copy = raw;
                convert_from_f32(dtype, &bad, copy.data() + 1 + at * width, 1);
                EXPECT_EQ(first_non_finite(dtype, copy.data() + 1, n), at) << dtype_name(dtype) << " at " << at;
                if (at + 1000 < n) convert_from_f32(dtype, &bad, copy.data() + 1 + (at + 1000) * width, 1);
                EXPECT_EQ(first_non_finite(dtype, copy.data() + 1, n), at) << dtype_name(dtype) << " at " << at;
            }
        }
    }
    // Every 16-bit pattern, in an order that puts a few non-finite ones among finite ones, against std::isfinite.
    for (DType dtype : {DType::BF16, DType::F16}) {
        std::vector<std::uint8_t> raw(2 * 65536);
        for (std::uint32_t start = 0; start < 65536; start += 4099) {
            for (std::uint32_t i = 0; i < 65536; ++i) {
                const auto bits = static_cast<std::uint16_t>((i * 40503u + start) & 0xFFFF);
                std::memcpy(raw.data() + 2 * i, &bits, 2);
            }
            EXPECT_EQ(first_non_finite(dtype, raw.data(), 65536), first_non_finite_by_value(dtype, raw.data(), 65536))
                << dtype_name(dtype) << " start " << start;
        }
    }
}

TEST(Dtype, NamesAndSizes) {
    EXPECT_EQ(dtype_name(DType::F32), "F32");
    EXPECT_EQ(dtype_name(DType::F16), "F16");
    EXPECT_EQ(dtype_name(DType::BF16), "BF16");
    EXPECT_EQ(dtype_size(DType::F32), 4u);
    EXPECT_EQ(dtype_size(DType::F16), 2u);
    EXPECT_EQ(dtype_size(DType::BF16), 2u);
}

}  // namespace
}  // namespace kascade
