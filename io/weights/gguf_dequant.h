// io/weights/gguf_dequant.h: GGUF tensor data (F32, F16, BF16 and the quantized types Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)
// as fp32, block layouts as ggml defines them (ggml-common.h) and values computed in the order of ggml's reference
// dequantize_row_* and gguf-py's quants.py, so each fp32 result is bit-identical to theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "io/weights/gguf_file.h"

namespace kascade {

/// True for the types gguf_dequantize() reads.
bool gguf_can_dequantize(GgmlType type);

/// "F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K": the types gguf_dequantize() reads, for messages.
std::string gguf_dequantizable_types();

/// Converts `n` elements of `type` at `src` (n a multiple of the type's block size, any alignment) to fp32 in `dst`.
/// `type` must be one gguf_can_dequantize() accepts.
void gguf_dequantize(GgmlType type, const std::uint8_t* src, float* dst, std::size_t n);

}  // namespace kascade
