// The zip archive fuzz target: a zip file (ZipArchive over libzip) with every entry read, in place or inflated; then,
// where it is one, the torch.save file it holds (TorchCheckpoint: data.pkl and the storages it names).
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/weights/torch_checkpoint.h"
#include "io/weights/zip_archive.h"

namespace kascade::fuzz {

namespace {

// Every byte a view promises must be readable (a view past the mapping faults here).
unsigned checksum(const std::uint8_t* data, std::size_t n) {
    unsigned sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += data[i];
    return sum;
}

}  // namespace

bool fuzz_zip_archive(FuzzInput input) {
    const std::filesystem::path file = write_input_file("model.pth", input);
    try {
        ZipArchive archive(file);
        for (const std::string& name : archive.names()) {
            require(archive.contains(name), fmt::format("entry {} is listed but not found", name));
            const auto bytes = archive.entry(name);
            static_cast<void>(checksum(bytes.data(), bytes.size()));
        }
    } catch (const kascade::Error&) {
        return false;
    }
    try {
        const TorchCheckpoint checkpoint(file);
        for (const auto& [name, t] : checkpoint.tensors()) {
            static_cast<void>(checksum(t.data, t.numel * dtype_size(t.dtype)));
        }
    } catch (const kascade::Error&) {
        // Not a torch.save file, or a damaged one: the zip reader's part was accepted all the same.
    }
    return true;
}

}  // namespace kascade::fuzz
