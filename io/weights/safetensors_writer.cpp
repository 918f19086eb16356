// io/weights/safetensors_writer.cpp: streaming, atomic safetensors writer.
#include "io/weights/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/weights/safetensors.h"

namespace kascade {
namespace {

// Elements converted per write() call: large enough to amortise the parallel region, small enough to stay in cache.
constexpr std::size_t kChunkElements = std::size_t{1} << 20;
constexpr std::size_t kHeaderAlignment = 8;

// A temporary file that is removed unless commit() renames it onto its destination.
class AtomicOutput {
  public:
    explicit AtomicOutput(const std::filesystem::path& path) : path_(path), tmp_(path) {
        tmp_ += ".tmp." + std::to_string(::getpid());
        fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        KASCADE_CHECK(fd_ >= 0, "cannot create file \"{}\": {}", tmp_.string(), std::strerror(errno));
    }
    ~AtomicOutput() {
        if (fd_ >= 0) {
            ::close(fd_);
            std::error_code ec;
            std::filesystem::remove(tmp_, ec);
        }
    }
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    void write(const void* data, std::size_t n) {
        const auto* p = static_cast<const std::uint8_t*>(data);
        while (n > 0) {
            const ssize_t written = ::write(fd_, p, n);
            if (written < 0 && errno == EINTR) continue;
            KASCADE_CHECK(written > 0, "cannot write file \"{}\": {}", tmp_.string(), std::strerror(errno));
            p += written;
            n -= static_cast<std::size_t>(written);
        }
    }

    void commit() {
        KASCADE_CHECK(::fsync(fd_) == 0, "cannot sync file \"{}\": {}", tmp_.string(), std::strerror(errno));
        const int rc = ::close(fd_);
        fd_ = -1;
        KASCADE_CHECK(rc == 0, "cannot close file \"{}\": {}", tmp_.string(), std::strerror(errno));
        std::error_code ec;
        std::filesystem::rename(tmp_, path_, ec);
        if (ec) {
            std::filesystem::remove(tmp_, ec);
            KASCADE_FAIL("cannot rename \"{}\" to \"{}\": {}", tmp_.string(), path_.string(), ec.message());
        }
    }

  private:
    std::filesystem::path path_;
    std::filesystem::path tmp_;
    int fd_ = -1;
};

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

    AtomicOutput out(path);
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
            const float* values = t.data + start;
            if (t.data == nullptr) {
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
