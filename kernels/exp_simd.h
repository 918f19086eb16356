// kernels/exp_simd.h: e^x for fp32 written so that a `#pragma omp simd` loop vectorises it (no call, no branch).
//
// std::exp on floats is a call per element unless the build uses -ffast-math (glibc's vector variants are only
// declared then), which makes SwiGLU and the log-sum-exp of perplexity scoring cost as much as a layer's matrix
// products. This is the classic Cephes expf: x = k ln2 + r with |r| <= ln2/2 (ln2 split in two parts so r is exact),
// e^r by a degree-7 polynomial, times 2^k built in the exponent bits. Accuracy: within 2 ulp of the exact value for
// every finite x whose result is a normal float (tested against double-precision exp); results below the smallest
// normal flush to 0, x > 88.72 gives +inf, -inf gives 0, NaN gives NaN.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace kascade {

#pragma omp declare simd
inline float exp_simd(float x) {
    constexpr float kLog2e = 1.44269504088896341f;
    constexpr float kLn2Hi = 0.693359375f;  // ln 2 to 9 bits: k * kLn2Hi is exact for |k| <= 2^15
    constexpr float kLn2Lo = -2.12194440e-4f;
    constexpr float kMaxInput = 88.7228317f;   // ln(FLT_MAX)
    constexpr float kMinInput = -87.3365479f;  // ln(FLT_MIN): below, the result would be subnormal
    // Clamp first so that k stays a small integer for any input (also NaN, which the final select restores).
    float xc = x > kMaxInput ? kMaxInput : x;
    xc = xc < kMinInput ? kMinInput : xc;
    xc = xc == xc ? xc : 0.0f;
    // k = round(x log2 e) by the 1.5 * 2^23 trick (the sum's last bit is the rounded integer): unlike std::floor it
    // vectorises without -fno-trapping-math.
    constexpr float kRoundingShift = 12582912.0f;
    const float kf = (xc * kLog2e + kRoundingShift) - kRoundingShift;
    const float r = (xc - kf * kLn2Hi) - kf * kLn2Lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^k for k in [-126, 127] built in the exponent bits; k = 128 (x within ln2/2 of kMaxInput) as 2^127 * 2.
    const int k = static_cast<int>(kf);
    const int k_bits = k > 127 ? 127 : k;
    p = k > 127 ? p * 2.0f : p;
    float e = p * std::bit_cast<float>(static_cast<uint32_t>(k_bits + 127) << 23);
    e = x > kMaxInput ? std::numeric_limits<float>::infinity() : e;
    e = x < kMinInput ? 0.0f : e;
    return x == x ? e : x;
}

}  // namespace kascade
