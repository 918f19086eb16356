// base/bf16.h: the scalar conversions between float and BF16 (the upper 16 bits of an IEEE float) every layer uses:
// the weight files (io/weights), the BF16 matrix products (kernels/matmul_simd.h) and the BF16 KV cache.
#pragma once

#include <cstdint>
#include <cstring>

namespace kascade {

/// BF16 bits of x rounded to nearest, ties to even, as PyTorch's .to(torch.bfloat16) does; NaN stays a (quiet) NaN
/// of the same sign, values beyond the BF16 range become inf.
inline uint16_t bf16_from_float(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

/// The float a BF16 value stands for (exact: every BF16 value is a float).
inline float float_from_bf16(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

}  // namespace kascade
