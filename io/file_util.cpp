#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <xxhash.h>

#include "base/error.h"

namespace kascade {

namespace {

/// What a path that is not a regular file is, for the message that refuses it.
const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

[[noreturn]] void fail_not_regular(const std::filesystem::path& path, mode_t mode) {
    KASCADE_FAIL("cannot read \"{}\": it is {}, expected a regular file", path.string(), file_kind(mode));
}

/// Opens a regular file for reading. Anything else is refused before it is opened (opening a FIFO blocks until a
/// writer comes, reading a device may never end), and again after (the path may have been replaced in between).
int open_regular_file(const std::filesystem::path& path) {
    struct stat st {};
    KASCADE_CHECK(::stat(path.c_str(), &st) == 0, "cannot open file \"{}\": {}", path.string(), std::strerror(errno));
    if (!S_ISREG(st.st_mode)) fail_not_regular(path, st.st_mode);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    KASCADE_CHECK(fd >= 0, "cannot open file \"{}\": {}", path.string(), std::strerror(errno));
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const mode_t mode = st.st_mode;
        ::close(fd);
        fail_not_regular(path, mode);
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

}  // namespace

void check_regular_file(const std::filesystem::path& path) {
    ::close(open_regular_file(path));
}

std::string read_file(const std::filesystem::path& path) {
    const int fd = open_regular_file(path);
    struct stat st {};
    ::fstat(fd, &st);
    std::string contents;
    contents.reserve(static_cast<std::size_t>(st.st_size));
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            KASCADE_FAIL("cannot read file \"{}\": {}", path.string(), std::strerror(err));
        }
        if (n == 0) break;
        contents.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return contents;
}

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    const int fd = open_regular_file(path);
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
