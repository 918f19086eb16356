// io/weights/weight_storage.h: where the tensors of a loaded checkpoint live (internal to the loaders): in place in
// the memory-mapped file when their dtype and alignment allow it, else in buffers converted once at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/weights/model_weights.h"

namespace kascade {

/// Held by ModelWeights::storage: the memory-mapped sources and the buffers of converted or realigned tensors.
struct WeightStorage {
    std::vector<std::shared_ptr<const void>> sources;
    std::vector<std::unique_ptr<std::uint8_t[]>> buffers;

    /// A new uninitialised buffer of `bytes` (aligned for any element type) that lives as long as this storage.
    std::uint8_t* allocate(std::size_t bytes) {
        buffers.push_back(std::make_unique_for_overwrite<std::uint8_t[]>(bytes));
        return buffers.back().get();
    }
};

/// Places the tensors of one checkpoint: each call returns where the tensor will be; conversions are queued and run
/// together by finish(), in parallel, so a model's hundreds of tensors cost one pass.
class WeightPlacement {
  public:
    WeightPlacement(WeightStorage& storage, WeightsDType weights_dtype) : storage_(storage), target_(weights_dtype) {}

    /// n elements of `dtype` at `data` (any alignment) as fp32: for norm weights and biases.
    const float* vector(DType dtype, const std::uint8_t* data, std::size_t n);

    /// A [rows][cols] matrix of `dtype` at `data`, in the dtype the options ask for: in place when that is the file's
    /// dtype and the data is aligned, else a converted copy.
    WeightMatrix matrix(DType dtype, const std::uint8_t* data, int rows, int cols);

    /// Fills every queued buffer. The pointers returned before are valid from now on.
    void finish();

  private:
    struct Pending {
        DType from;
        DType to;
        const std::uint8_t* src;
        std::uint8_t* dst;
        std::size_t n;
    };
    std::uint8_t* queue(DType from, DType to, const std::uint8_t* src, std::size_t n);

    WeightStorage& storage_;
    WeightsDType target_;
    std::vector<Pending> pending_;
};

}  // namespace kascade
