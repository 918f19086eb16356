// io/weights/dtype.h: the element types a weight file may store, and their conversion to and from fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/bf16.h"
#include "base/enum_names.h"

namespace kascade {

/// Element type of a stored tensor. Only the floating-point types a Llama checkpoint uses are supported.
enum class DType { F32, F16, BF16 };
/// kascade's names (random-model --dtype); the files' own spellings are dtype_name's.
template <>
struct EnumNameTable<DType> {
    static constexpr EnumNames<DType, 3> names{{{DType::F32, "f32"}, {DType::F16, "f16"}, {DType::BF16, "bf16"}}};
};

/// The safetensors spelling: "F32", "F16", "BF16".
std::string_view dtype_name(DType dtype);

/// Bytes per element: 4 for F32, 2 for F16 and BF16.
std::size_t dtype_size(DType dtype);

/// F16 to fp32, exact (every F16 value is representable in fp32; NaN stays NaN, inf stays inf). BF16: base/bf16.h.
float f16_to_f32(std::uint16_t bits);

/// Round-to-nearest-even conversion, as PyTorch's .to(torch.float16) does; NaN stays a quiet NaN, values beyond the
/// F16 range become inf.
std::uint16_t f32_to_f16(float value);

/// Converts `n` little-endian elements of type `dtype` at `src` (any alignment, size n * dtype_size) to fp32 in `dst`
/// (size n). Runs in parallel (OpenMP) for large n.
void convert_to_f32(DType dtype, const std::uint8_t* src, float* dst, std::size_t n);

/// The index of the first NaN or infinity among `n` little-endian elements of `dtype` at `src` (any alignment), or
/// n if every element is finite. Reads the bits only (exponent all ones), in parallel (OpenMP) for large n.
std::size_t first_non_finite(DType dtype, const std::uint8_t* src, std::size_t n);

/// One convert_to_f32 call of a batch.
struct F32Conversion {
    DType dtype = DType::F32;
    const std::uint8_t* src = nullptr;  ///< n * dtype_size(dtype) bytes, any alignment
    float* dst = nullptr;               ///< n values
    std::size_t n = 0;
};

/// Runs every conversion of `batch` in a single parallel region over fixed-size chunks, so that a model's hundreds of
/// tensors cost one fork/join (which matters on an oversubscribed machine) and large and small tensors balance.
void convert_to_f32(const std::vector<F32Conversion>& batch);

/// Converts `n` fp32 values at `src` to `dtype` at `dst` (any alignment, size n * dtype_size), little-endian.
/// Runs in parallel (OpenMP) for large n.
void convert_from_f32(DType dtype, const float* src, std::uint8_t* dst, std::size_t n);

}  // namespace kascade
