// io/weights/gguf_dequant.cpp: the dequantization of gguf_dequant.h, one block at a time.
//
// Built with -ffp-contract=off (io/CMakeLists.txt): ggml and gguf-py round each product before the subtraction
// (d1 * q - m1), and a fused multiply-add would round once and give different bits.
#include "io/weights/gguf_dequant.h"

#include <array>
#include <cstring>

#include "base/error.h"
#include "io/weights/dtype.h"

namespace kascade {
namespace {

constexpr std::array<GgmlType, 8> kDequantizable = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                                    GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

float f16_at(const std::uint8_t* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return f16_to_f32(bits);
}

// block_q8_0: f16 d, int8 qs[32]; x = qs * d.
void q8_0_block(const std::uint8_t* b, float* y) {
    const float d = f16_at(b);
    const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) y[i] = static_cast<float>(qs[i]) * d;
}

// block_q4_0: f16 d, u8 qs[16]; the low nibbles are elements 0..15, the high ones 16..31; x = (q - 8) * d.
void q4_0_block(const std::uint8_t* b, float* y) {
    const float d = f16_at(b);
    const std::uint8_t* qs = b + 2;
    for (int i = 0; i < 16; ++i) {
        y[i] = d * static_cast<float>((qs[i] & 0x0F) - 8);
        y[i + 16] = d * static_cast<float>((qs[i] >> 4) - 8);
    }
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (ggml's get_scale_min_k4): 12 bytes hold
// 8 scales and 8 mins; j < 4 in the low 6 bits of bytes j and j + 4, j >= 4 split over byte j + 4 and the top bits
// of bytes j - 4 and j.
void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* scale, std::uint8_t* min) {
    if (j < 4) {
        *scale = q[j] & 63;
        *min = q[j + 4] & 63;
    } else {
        *scale = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// block_q4_K: f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Each 64 elements use 32 bytes of qs: the low nibbles
// (sub-block 2i) then the high ones (sub-block 2i + 1); x = (d * scale) * q - (dmin * min).
void q4_k_block(const std::uint8_t* b, float* y) {
    const float d = f16_at(b);
    const float dmin = f16_at(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qs = b + 16;
    for (int i = 0; i < 4; ++i) {
        std::uint8_t sc, m;
        scale_min_k4(2 * i, scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = dmin * static_cast<float>(m);
        scale_min_k4(2 * i + 1, scales, &sc, &m);
        const float d2 = d * static_cast<float>(sc);
        const float m2 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(qs[l] & 0x0F) - m1;
        for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(qs[l] >> 4) - m2;
        qs += 32;
        y += 64;
    }
}

// block_q5_K: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]: Q4_K's nibbles plus a fifth bit, bit j of
// qh[l] for element l of sub-block j.
void q5_k_block(const std::uint8_t* b, float* y) {
    const float d = f16_at(b);
    const float dmin = f16_at(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* ql = b + 48;
    for (int i = 0; i < 4; ++i) {
        std::uint8_t sc, m;
        scale_min_k4(2 * i, scales, &sc, &m);
        const float d1 = d * static_cast<float>(sc);
        const float m1 = dmin * static_cast<float>(m);
        scale_min_k4(2 * i + 1, scales, &sc, &m);
        const float d2 = d * static_cast<float>(sc);
        const float m2 = dmin * static_cast<float>(m);
        const int low_bit = 2 * i;
        const int high_bit = 2 * i + 1;
        for (int l = 0; l < 32; ++l) {
            y[l] = d1 * static_cast<float>((ql[l] & 0x0F) + (((qh[l] >> low_bit) & 1) << 4)) - m1;
        }
        for (int l = 0; l < 32; ++l) {
            y[32 + l] = d2 * static_cast<float>((ql[l] >> 4) + (((qh[l] >> high_bit) & 1) << 4)) - m2;
        }
        ql += 32;
        y += 64;
    }
}

// block_q6_K: u8 ql[128] (low 4 bits), u8 qh[64] (high 2 bits), int8 scales[16], f16 d. Each half of 128 elements
// uses 64 bytes of ql and 32 of qh: element 32k + l of the half takes nibble k / 2 of ql[l + 32 (k % 2)] and bits
// 2k..2k+1 of qh[l]; x = (d * scale) * (q - 32), one scale per 16 elements.
void q6_k_block(const std::uint8_t* b, float* y) {
    const std::uint8_t* ql = b;
    const std::uint8_t* qh = b + 128;
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    const float d = f16_at(b + 208);
    for (int half = 0; half < 2; ++half) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = static_cast<std::int8_t>((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = static_cast<std::int8_t>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = static_cast<std::int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = static_cast<std::int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = (d * static_cast<float>(scales[is + 0])) * static_cast<float>(q1);
            y[l + 32] = (d * static_cast<float>(scales[is + 2])) * static_cast<float>(q2);
            y[l + 64] = (d * static_cast<float>(scales[is + 4])) * static_cast<float>(q3);
            y[l + 96] = (d * static_cast<float>(scales[is + 6])) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        scales += 8;
    }
}

using BlockFunction = void (*)(const std::uint8_t*, float*);

BlockFunction block_function(GgmlType type) {
    switch (type) {
        case GgmlType::Q8_0:
            return q8_0_block;
        case GgmlType::Q4_0:
            return q4_0_block;
        case GgmlType::Q4_K:
            return q4_k_block;
        case GgmlType::Q5_K:
            return q5_k_block;
        case GgmlType::Q6_K:
            return q6_k_block;
        default:
            return nullptr;
    }
}

}  // namespace

bool gguf_can_dequantize(GgmlType type) {
    for (const GgmlType t : kDequantizable) {
        if (t == type) return true;
    }
    return false;
}

std::string gguf_dequantizable_types() {
    std::string names;
    for (const GgmlType t : kDequantizable)
        names += (names.empty() ? "" : ", ") + std::string(ggml_type_traits(t).name);
    return names;
}

void gguf_dequantize(GgmlType type, const std::uint8_t* src, float* dst, std::size_t n) {
    switch (type) {
        case GgmlType::F32:
            return convert_to_f32(DType::F32, src, dst, n);
        case GgmlType::F16:
            return convert_to_f32(DType::F16, src, dst, n);
        case GgmlType::BF16:
            return convert_to_f32(DType::BF16, src, dst, n);
        default:
            break;
    }
    const BlockFunction block = block_function(type);
    KASCADE_ASSERT(block != nullptr);
    const GgmlTypeTraits& traits = ggml_type_traits(type);
    KASCADE_ASSERT(n % traits.block_elements == 0);
    for (std::size_t i = 0; i < n / traits.block_elements; ++i) {
        block(src + i * traits.block_bytes, dst + i * traits.block_elements);
    }
}

}  // namespace kascade
