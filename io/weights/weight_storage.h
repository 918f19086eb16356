// io/weights/weight_storage.h: the owner of the memory a ModelWeights' pointers point into (internal to the loaders).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace kascade {

/// Held by ModelWeights::storage: the memory-mapped sources (used in place where possible) and the fp32 buffers of
/// tensors that had to be converted or realigned.
struct WeightStorage {
    std::vector<std::shared_ptr<const void>> sources;
    std::vector<std::unique_ptr<float[]>> buffers;

    /// A new uninitialised fp32 buffer of n elements that lives as long as this storage.
    float* allocate(std::size_t n) {
        buffers.push_back(std::make_unique_for_overwrite<float[]>(n));
        return buffers.back().get();
    }
};

}  // namespace kascade
