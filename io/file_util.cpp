#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <xxhash.h>

#include "base/error.h"

namespace kascade {

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    KASCADE_CHECK(in.good(), "cannot open file \"{}\": {}", path.string(), std::strerror(errno));
    std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    KASCADE_CHECK(!in.bad(), "cannot read file \"{}\": {}", path.string(), std::strerror(errno));
    return contents;
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    KASCADE_CHECK(fd >= 0, "cannot open file \"{}\": {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        KASCADE_FAIL("cannot stat file \"{}\": {}", path.string(), std::strerror(err));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        int err = errno;
        ::close(fd);
        KASCADE_CHECK(p != MAP_FAILED, "cannot memory-map file \"{}\": {}", path.string(), std::strerror(err));
        data_ = static_cast<std::uint8_t*>(p);
    } else {
        ::close(fd);
    }
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        if (data_ != nullptr) ::munmap(data_, size_);
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

std::string hash_hex(std::string_view bytes) {
    return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()));
}

std::string hash_file_hex(const std::filesystem::path& path) {
    MappedFile file(path);
    return fmt::format("{:016x}", XXH3_64bits(file.data(), file.size()));
}

}  // namespace kascade
