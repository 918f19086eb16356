// io/weights/safetensors_writer.cpp: streaming, atomic safetensors writer.
#include "io/weights/safetensors_writer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/weights/safetensors.h"

namespace kascade {
namespace {

// Elements converted per write() call: large enough to amortise the parallel region, small enough to stay in cache.
constexpr std::size_t kChunkElements = std::size_t{1} << 20;
constexpr std::size_t kHeaderAlignment = 8;

}  // namespace

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsWriteTensor>& tensors) {
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = {{"format", "pt"}};
    std::vector<std::size_t> numels;
    std::uint64_t offset = 0;
    for (const SafetensorsWriteTensor& t : tensors) {
        KASCADE_CHECK(!t.name.empty() && t.name != "__metadata__" && !header.contains(t.name),
                      "{}: cannot write tensor name \"{}\" (empty, reserved or duplicate)", path.string(), t.name);
        std::size_t numel = 1;
        for (std::int64_t d : t.shape) {
            KASCADE_CHECK(d >= 0, "{}: tensor {} has negative extent in shape {}", path.string(), t.name,
                          shape_string(t.shape));
            numel *= static_cast<std::size_t>(d);
        }
        KASCADE_CHECK(numel == 0 || t.data != nullptr || t.fill, "{}: tensor {} has no data", path.string(), t.name);
        const std::uint64_t nbytes = numel * dtype_size(t.dtype);
        header[t.name] = {
            {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
        offset += nbytes;
        numels.push_back(numel);
    }
    std::string header_text = header.dump();
    header_text.append((kHeaderAlignment - header_text.size() % kHeaderAlignment) % kHeaderAlignment, ' ');
    const std::uint64_t header_len = header_text.size();

    AtomicFile out(path);
    out.write(&header_len, sizeof header_len);
    out.write(header_text.data(), header_text.size());
    std::vector<std::uint8_t> chunk;
    std::vector<float> generated;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const SafetensorsWriteTensor& t = tensors[i];
        if (t.dtype == DType::F32 && t.data != nullptr) {
            out.write(t.data, numels[i] * sizeof(float));
            continue;
        }
        chunk.resize(std::min(numels[i], kChunkElements) * dtype_size(t.dtype));
        for (std::size_t start = 0; start < numels[i]; start += kChunkElements) {
            const std::size_t n = std::min(kChunkElements, numels[i] - start);
            const float* values = nullptr;
            if (t.data != nullptr) {
                values = t.data + start;
            } else {  // generated: a null data pointer has no offset (null + offset is undefined behaviour)
                generated.resize(n);
                t.fill(start, n, generated.data());
                values = generated.data();
            }
            convert_from_f32(t.dtype, values, chunk.data(), n);
            out.write(chunk.data(), n * dtype_size(t.dtype));
        }
    }
    out.commit();
}

}  // namespace kascade
