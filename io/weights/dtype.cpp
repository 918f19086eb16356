// io/weights/dtype.cpp: fp32 <-> BF16/F16 conversion by bit manipulation (no F16C dependency, so the same results on
// every CPU the tests run on).
#include "io/weights/dtype.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/error.h"

namespace kascade {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors and llama2.c files are little-endian");

// Below this many elements a parallel region costs more than it saves.
constexpr std::size_t kParallelMinElements = std::size_t{1} << 16;

std::uint16_t load_u16(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

void store_u16(std::uint8_t* p, std::uint16_t v) {
    std::memcpy(p, &v, sizeof v);
}

// Work unit of the batched conversion: large enough to amortise scheduling, small enough to balance two threads.
constexpr std::size_t kConversionChunkElements = std::size_t{1} << 18;

// The serial conversion of one contiguous range.
void convert_range_to_f32(DType dtype, const std::uint8_t* src, float* dst, std::size_t n) {
    switch (dtype) {
        case DType::F32:
            std::memcpy(dst, src, n * sizeof(float));
            return;
        case DType::BF16:
            for (std::size_t i = 0; i < n; ++i) dst[i] = float_from_bf16(load_u16(src + 2 * i));
            return;
        case DType::F16:
            for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(src + 2 * i));
            return;
    }
}

}  // namespace

std::string_view dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32:
            return "F32";
        case DType::F16:
            return "F16";
        case DType::BF16:
            return "BF16";
    }
    KASCADE_ASSERT(false);
    return {};
}

std::size_t dtype_size(DType dtype) {
    return dtype == DType::F32 ? 4 : 2;
}

float f16_to_f32(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
    if (exponent == 0) {
        // Zero or subnormal: mantissa * 2^-24, exact in fp32.
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return sign != 0 ? -magnitude : magnitude;
    }
    // Rebias the exponent from 15 to 127.
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_f16(float value) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t exponent = (bits >> 23) & 0xffu;
    std::uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xff) {  // inf stays inf; NaN keeps its top payload bits and is made quiet
        return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u));
    }
    const int half_exponent = static_cast<int>(exponent) - 127 + 15;
    if (half_exponent >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
    if (half_exponent <= 0) {
        // F16 subnormal: the value in units of 2^-24 is (1.mantissa) * 2^(exponent - 126).
        if (half_exponent < -10) return sign;  // below half the smallest subnormal: rounds to zero
        mantissa |= 0x800000u;
        const int shift = 14 - half_exponent;  // in [14, 24]
        std::uint32_t result = mantissa >> shift;
        const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
        const std::uint32_t halfway = 1u << (shift - 1);
        if (remainder > halfway || (remainder == halfway && (result & 1u) != 0)) ++result;
        return static_cast<std::uint16_t>(sign | result);  // a carry turns it into the smallest normal: correct
    }
    std::uint32_t result = (static_cast<std::uint32_t>(half_exponent) << 10) | (mantissa >> 13);
    const std::uint32_t remainder = mantissa & 0x1fffu;
    if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u) != 0)) ++result;  // a carry may reach inf
    return static_cast<std::uint16_t>(sign | result);
}

void convert_to_f32(DType dtype, const std::uint8_t* src, float* dst, std::size_t n) {
    convert_to_f32({F32Conversion{dtype, src, dst, n}});
}

void convert_to_f32(const std::vector<F32Conversion>& batch) {
    struct Chunk {
        const F32Conversion* job;
        std::size_t begin, end;
    };
    std::vector<Chunk> chunks;
    std::size_t total = 0;
    for (const F32Conversion& job : batch) {
        for (std::size_t begin = 0; begin < job.n; begin += kConversionChunkElements) {
            chunks.push_back({&job, begin, std::min(job.n, begin + kConversionChunkElements)});
        }
        total += job.n;
    }
    const auto n_chunks = static_cast<std::ptrdiff_t>(chunks.size());
#pragma omp parallel for schedule(dynamic) if (total >= kParallelMinElements)
    for (std::ptrdiff_t c = 0; c < n_chunks; ++c) {
        const Chunk& chunk = chunks[c];
        const std::size_t width = dtype_size(chunk.job->dtype);
        convert_range_to_f32(chunk.job->dtype, chunk.job->src + chunk.begin * width, chunk.job->dst + chunk.begin,
                             chunk.end - chunk.begin);
    }
}

void convert_from_f32(DType dtype, const float* src, std::uint8_t* dst, std::size_t n) {
    const auto count = static_cast<std::ptrdiff_t>(n);
    switch (dtype) {
        case DType::F32:
            std::memcpy(dst, src, n * sizeof(float));
            return;
        case DType::BF16:
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
            for (std::ptrdiff_t i = 0; i < count; ++i) store_u16(dst + 2 * i, bf16_from_float(src[i]));
            return;
        case DType::F16:
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
            for (std::ptrdiff_t i = 0; i < count; ++i) store_u16(dst + 2 * i, f32_to_f16(src[i]));
            return;
    }
}

namespace {

/// first_non_finite over elements [begin, end) of Bits-wide values: whole blocks of kBlock elements are tested with a
/// branch-free OR (which the compiler vectorises) until one holds a non-finite value; the element loop then finds it
/// there, or scans the tail. Element by element, with a memcpy of the dtype's run-time width each, the scan read
/// 0.38 GB/s on one core (at that rate the 16 GB of an 8B BF16 checkpoint take about 21 s on 2 threads); this reads
/// 21 GB/s, about memory speed (2-vCPU Zen 5 VM, 512 MB of BF16 read from memory, both versions in one process).
template <typename Bits>
std::size_t first_non_finite_in(const std::uint8_t* src, std::size_t begin, std::size_t end, Bits mask) {
    constexpr std::size_t kBlock = 256;
    const auto non_finite = [src, mask](std::size_t i) {
        Bits v;
        std::memcpy(&v, src + i * sizeof(Bits), sizeof(Bits));  // little-endian, as the files store them
        return (v & mask) == mask;
    };
    std::size_t i = begin;
    for (; i + kBlock <= end; i += kBlock) {
        unsigned hits = 0;
        for (std::size_t k = 0; k < kBlock; ++k) hits |= non_finite(i + k);
        if (hits != 0) break;
    }
    for (; i < end; ++i)
        if (non_finite(i)) return i;
    return end;
}

}  // namespace

std::size_t first_non_finite(DType dtype, const std::uint8_t* src, std::size_t n) {
    // An IEEE value is NaN or infinite exactly when its exponent bits are all ones.
    const auto scan = [&](std::size_t begin, std::size_t end) {
        switch (dtype) {
            case DType::F32:
                return first_non_finite_in<std::uint32_t>(src, begin, end, 0x7F800000u);
            case DType::BF16:
                return first_non_finite_in<std::uint16_t>(src, begin, end, 0x7F80u);
            case DType::F16:
                return first_non_finite_in<std::uint16_t>(src, begin, end, 0x7C00u);
        }
        return end;
    };
    // Chunks scanned in parallel; the first chunk holding a non-finite value gives the answer.
    constexpr std::size_t kChunk = std::size_t{1} << 16;
    const std::size_t n_chunks = (n + kChunk - 1) / kChunk;
    std::size_t first = n;
#pragma omp parallel for schedule(dynamic) reduction(min : first) if (n_chunks > 1)
    for (std::size_t c = 0; c < n_chunks; ++c) {
        const std::size_t end = std::min(n, (c + 1) * kChunk);
        const std::size_t bad = scan(c * kChunk, end);
        if (bad != end) first = std::min(first, bad);
    }
    return first;
}

}  // namespace kascade
