// io/weights/torch_checkpoint.cpp: TorchCheckpoint: the archive layout torch.save writes (torch >= 1.6), with each
// tensor resolved to its bytes.
#include "io/weights/torch_checkpoint.h"

#include <string_view>

#include "base/error.h"
#include "io/weights/torch_pickle.h"

namespace kascade {

TorchCheckpoint::TorchCheckpoint(const std::filesystem::path& path) : archive_(path) {
    const std::string file = path.string();
    // torch.save puts everything in one folder named after the file ("archive" in newer versions): <folder>/data.pkl,
    // <folder>/data/<storage key>, <folder>/version and, since 2.1, <folder>/byteorder.
    std::string pickle_name;
    for (const std::string& name : archive_.names()) {
        const std::size_t slash = name.find('/');
        if (slash == std::string::npos || name.substr(slash + 1) != "data.pkl") continue;
        KASCADE_CHECK(pickle_name.empty(), "{}: two pickles, {} and {}: not one torch.save file", file, pickle_name,
                      name);
        pickle_name = name;
    }
    KASCADE_CHECK(!pickle_name.empty(),
                  "{}: the zip archive has no <folder>/data.pkl entry: not a file written by torch.save", file);
    const std::string folder = pickle_name.substr(0, pickle_name.size() - std::string_view("data.pkl").size());
    if (archive_.contains(folder + "byteorder")) {
        const std::span<const std::uint8_t> order = archive_.entry(folder + "byteorder");
        const std::string_view text(reinterpret_cast<const char*>(order.data()), order.size());
        KASCADE_CHECK(text == "little", "{}: entry {}byteorder is \"{}\"; only little-endian checkpoints are read",
                      file, folder, text);
    }

    const auto records = read_torch_pickle(archive_.entry(pickle_name), file + ": " + pickle_name);
    std::map<std::string, std::span<const std::uint8_t>> storages;  // several tensors may view one storage
    for (const auto& [name, record] : records) {
        const std::string entry = folder + "data/" + record.storage_key;
        KASCADE_CHECK(archive_.contains(entry), "{}: tensor {} is stored in entry {}, which is missing", file, name,
                      entry);
        auto found = storages.find(entry);
        if (found == storages.end()) found = storages.emplace(entry, archive_.entry(entry)).first;
        const std::span<const std::uint8_t> storage = found->second;
        const std::size_t element = dtype_size(record.dtype);
        // storage_numel < 2^48 (read_torch_pickle checks the tensor fits it; the storage itself is checked here).
        KASCADE_CHECK(storage.size() / element == static_cast<std::uint64_t>(record.storage_numel) &&
                          storage.size() % element == 0,
                      "{}: entry {} holds {} bytes, but {} declares it as {} elements of {} ({} bytes)", file, entry,
                      storage.size(), pickle_name, record.storage_numel, dtype_name(record.dtype),
                      static_cast<std::uint64_t>(record.storage_numel) * element);
        TorchTensor& t = tensors_[name];
        t.dtype = record.dtype;
        t.shape = record.shape;
        t.numel = static_cast<std::size_t>(record.numel());
        t.data = storage.data() + static_cast<std::size_t>(record.storage_offset) * element;
    }
}

const TorchTensor* TorchCheckpoint::find(const std::string& name) const {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace kascade
