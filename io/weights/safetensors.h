// io/weights/safetensors.h: reading safetensors files (https://huggingface.co/docs/safetensors), single or sharded.
//
// A file is: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end)}},
// then the data region the offsets are relative to. Files are memory-mapped; nothing is copied here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/file_util.h"
#include "io/weights/dtype.h"

namespace kascade {

/// One tensor of a mapped safetensors file. `data` points into the mapping and may have any alignment.
struct SafetensorsTensor {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    const std::uint8_t* data = nullptr;  ///< nbytes bytes
    std::size_t nbytes = 0;
    const std::filesystem::path* file = nullptr;  ///< the file it is stored in (for messages)

    std::size_t numel() const { return nbytes / dtype_size(dtype); }
};

/// A memory-mapped, fully validated safetensors file. Opening it checks the header length, the JSON, every entry's
/// dtype/shape/data_offsets, that offsets lie inside the file and do not overlap, and that every byte size matches
/// its shape; each problem is a kascade::Error naming the file (and tensor).
class SafetensorsFile {
  public:
    explicit SafetensorsFile(const std::filesystem::path& path);
    // The tensors point at the mapping and at path(): the object stays where it was built.
    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::filesystem::path& path() const { return file_.path(); }
    /// The tensor called `name`, or null.
    const SafetensorsTensor* find(const std::string& name) const;
    const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }

  private:
    MappedFile file_;
    std::map<std::string, SafetensorsTensor> tensors_;
};

/// The tensors of a model stored in one safetensors file or sharded over several, listed by a
/// model.safetensors.index.json whose "weight_map" maps each tensor name to its shard file (relative to the index).
class SafetensorsSet {
  public:
    /// `path` is a .safetensors file or an index .json; shards are opened and validated at once.
    explicit SafetensorsSet(const std::filesystem::path& path);

    /// The .safetensors file or the index it was opened from (for messages).
    const std::filesystem::path& path() const { return path_; }
    /// The tensor called `name`, or null.
    const SafetensorsTensor* find(const std::string& name) const;
    const std::map<std::string, const SafetensorsTensor*>& tensors() const { return tensors_; }

  private:
    std::filesystem::path path_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const SafetensorsTensor*> tensors_;
};

/// "[64, 576]": a shape as messages print it.
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace kascade
