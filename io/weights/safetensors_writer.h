// io/weights/safetensors_writer.h: writing safetensors files from fp32 arrays (test models, converted checkpoints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/weights/dtype.h"

namespace kascade {

/// One tensor to write: fp32 values, stored on disk as `dtype` (rounded to nearest even for BF16/F16). The values
/// come from memory (data) or, for tensors too large to hold in fp32, from a generator called chunk by chunk (fill).
struct SafetensorsWriteTensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const float* data = nullptr;  ///< product(shape) values, row-major; or null with fill
    /// fill(first, n, out): writes elements [first, first + n) of the row-major tensor to out.
    std::function<void(std::size_t, std::size_t, float*)> fill = {};
};

/// Writes `tensors` (in this order) as one safetensors file with {"__metadata__": {"format": "pt"}}, the header padded
/// to a multiple of 8 bytes as the reference writer does. Converts in parallel, streams in chunks (no second copy of
/// the model in memory) and writes atomically (AtomicFile, io/atomic_file.h).
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsWriteTensor>& tensors);

}  // namespace kascade
