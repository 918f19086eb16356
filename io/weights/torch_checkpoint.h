// io/weights/torch_checkpoint.h: the tensors of a torch.save file (a zip archive of data.pkl and one raw entry per
// storage), viewed in place in the memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/weights/dtype.h"
#include "io/weights/zip_archive.h"

namespace kascade {

/// One tensor of a torch.save file: contiguous, little-endian, numel * dtype_size(dtype) bytes at `data` (inside the
/// mapped archive, any alignment).
struct TorchTensor {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const std::uint8_t* data = nullptr;
    std::size_t numel = 0;
};

/// A torch.save file of a state dict, read with read_torch_pickle (which refuses anything but tensors) and checked:
/// one <name>/data.pkl, little-endian byte order, every storage entry present and exactly as large as data.pkl
/// declares. Errors name the file and the entry or tensor.
class TorchCheckpoint {
  public:
    explicit TorchCheckpoint(const std::filesystem::path& path);
    TorchCheckpoint(const TorchCheckpoint&) = delete;
    TorchCheckpoint& operator=(const TorchCheckpoint&) = delete;

    const std::filesystem::path& path() const { return archive_.path(); }
    /// The tensor called `name`, or null.
    const TorchTensor* find(const std::string& name) const;
    const std::map<std::string, TorchTensor>& tensors() const { return tensors_; }

  private:
    ZipArchive archive_;
    std::map<std::string, TorchTensor> tensors_;
};

}  // namespace kascade
