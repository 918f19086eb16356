// The torch pickle fuzz target: a data.pkl (read_torch_pickle, the restricted unpickler), then the records it yields.
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/weights/torch_pickle.h"

namespace kascade::fuzz {

bool fuzz_torch_pickle(FuzzInput input) {
    try {
        const auto tensors = read_torch_pickle(input, "data.pkl");
        for (const auto& [name, t] : tensors) {
            require(t.shape.size() == t.strides.size(),
                    fmt::format("tensor {}: {} sizes but {} strides accepted", name, t.shape.size(), t.strides.size()));
            std::int64_t numel = 1;
            for (const std::int64_t d : t.shape) {
                require(d >= 0, fmt::format("tensor {}: a negative extent was accepted", name));
                numel *= d;
            }
            require(t.storage_offset >= 0 && numel <= t.storage_numel - t.storage_offset,
                    fmt::format("tensor {}: {} elements from {} accepted in a storage of {}", name, numel,
                                t.storage_offset, t.storage_numel));
        }
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
