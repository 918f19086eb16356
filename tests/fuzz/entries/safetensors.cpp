// The safetensors fuzz target: the header of a single .safetensors file and the tensor views it yields.
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/weights/safetensors.h"

namespace kascade::fuzz {

bool fuzz_safetensors(FuzzInput input) {
    try {
        const SafetensorsFile file(write_input_file("model.safetensors", input));
        for (const auto& [name, tensor] : file.tensors()) {
            std::size_t numel = 1;
            for (const std::int64_t d : tensor.shape) {
                require(d >= 0, fmt::format("tensor {}: a negative extent was accepted", name));
                numel *= static_cast<std::size_t>(d);
            }
            require(tensor.nbytes == numel * dtype_size(tensor.dtype),
                    fmt::format("tensor {}: {} bytes accepted for {} elements", name, tensor.nbytes, numel));
            require(tensor.nbytes == 0 || tensor.data != nullptr, fmt::format("tensor {}: no data", name));
            // Every byte the view promises must be inside the mapping (a read past it faults).
            unsigned checksum = 0;
            for (std::size_t i = 0; i < tensor.nbytes; ++i) checksum += tensor.data[i];
            static_cast<void>(checksum);
            require(file.find(name) == &tensor, fmt::format("tensor {}: find() does not return it", name));
        }
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
