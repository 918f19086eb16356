// io/weights/safetensors_writer.h: writing safetensors files from fp32 arrays (test models, converted checkpoints).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/weights/dtype.h"

namespace kascade {

/// One tensor to write: fp32 values in memory, stored on disk as `dtype` (rounded to nearest even for BF16/F16).
struct SafetensorsWriteTensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const float* data = nullptr;  ///< product(shape) values, row-major
};

/// Writes `tensors` (in this order) as one safetensors file with {"__metadata__": {"format": "pt"}}, the header padded
/// to a multiple of 8 bytes as the reference writer does. Converts in parallel, streams in chunks (no second copy of
/// the model in memory) and writes atomically: a temporary file beside `path`, fsync, rename.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsWriteTensor>& tensors);

}  // namespace kascade
