// io/atomic_file.cpp: AtomicFile and the partial-file names (see atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPartialMarker = ".partial-";

/// fsync a file or folder by name, so that a rename that follows survives a crash with the data in place. Errors
/// name `shown`: the file the user knows (never a partial file's internal name).
void fsync_path(const fs::path& path, int flags, const fs::path& shown) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    KASCADE_CHECK(fd >= 0, "cannot open \"{}\" to sync it: {}", shown.string(), std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    KASCADE_CHECK(rc == 0, "cannot sync \"{}\": {}", shown.string(), std::strerror(err));
}

}  // namespace

std::string host_name() {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    return host;
}

fs::path partial_path_for(const fs::path& final_path) {
    return final_path.string() + std::string(kPartialMarker) + host_name() + "-" + std::to_string(::getpid());
}

bool is_abandoned_partial(std::string_view file_name) {
    const size_t at = file_name.rfind(kPartialMarker);
    if (at == std::string_view::npos) return false;
    const std::string_view writer = file_name.substr(at + kPartialMarker.size());
    // "<host>-<pid>"; files of kascade versions before hosts were recorded are "<pid>", from this host.
    const size_t dash = writer.rfind('-');
    const std::string_view host = dash == std::string_view::npos ? std::string_view{} : writer.substr(0, dash);
    if (!host.empty() && host != host_name()) return false;
    const std::string pid_text(dash == std::string_view::npos ? writer : writer.substr(dash + 1));
    char* end = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (pid_text.empty() || *end != '\0' || pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

AtomicFile::AtomicFile(fs::path final_path)
    : final_path_(std::move(final_path)), partial_path_(partial_path_for(final_path_)) {
    if (!final_path_.has_parent_path()) return;
    std::error_code ec;
    fs::create_directories(final_path_.parent_path(), ec);
    KASCADE_CHECK(!ec, "cannot create folder \"{}\": {}", final_path_.parent_path().string(), ec.message());
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) {
        std::error_code ignored;
        fs::remove(partial_path_, ignored);
    }
}

void AtomicFile::write(const void* data, std::size_t n) {
    KASCADE_ASSERT(!committed_);
    if (fd_ < 0) {
        fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        KASCADE_CHECK(fd_ >= 0, "cannot create file \"{}\": {}", final_path_.string(), std::strerror(errno));
    }
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
        const ssize_t written = ::write(fd_, p, n);
        if (written < 0 && errno == EINTR) continue;
        KASCADE_CHECK(written > 0, "cannot write file \"{}\": {}", final_path_.string(), std::strerror(errno));
        p += written;
        n -= static_cast<std::size_t>(written);
    }
}

void AtomicFile::commit() {
    KASCADE_ASSERT(!committed_);
    if (fd_ >= 0) {
        KASCADE_CHECK(::fsync(fd_) == 0, "cannot sync file \"{}\": {}", final_path_.string(), std::strerror(errno));
        const int rc = ::close(fd_);
        fd_ = -1;
        KASCADE_CHECK(rc == 0, "cannot close file \"{}\": {}", final_path_.string(), std::strerror(errno));
    } else {
        fsync_path(partial_path_, O_RDONLY, final_path_);  // written by a library, or an empty file never written to
    }
    std::error_code ec;
    fs::rename(partial_path_, final_path_, ec);
    KASCADE_CHECK(!ec, "cannot rename the new file onto \"{}\": {}", final_path_.string(), ec.message());
    committed_ = true;
    // rename() does nothing when both names are links to one file (copy_file_atomic of a file another process
    // linked meanwhile): the partial name is then still there.
    fs::remove(partial_path_, ec);
    const fs::path folder = final_path_.has_parent_path() ? final_path_.parent_path() : fs::path(".");
    fsync_path(folder, O_RDONLY | O_DIRECTORY, folder);
}

void write_file_atomic(const fs::path& path, std::string_view contents) {
    AtomicFile file(path);
    file.write(contents);
    file.commit();
}

void copy_file_atomic(const fs::path& from, const fs::path& to) {
    AtomicFile file(to);
    std::error_code ec;
    if (fs::equivalent(from, to, ec)) return;  // already a link to it
    fs::remove(file.partial_path(), ec);
    fs::create_hard_link(from, file.partial_path(), ec);
    if (ec) {
        fs::copy_file(from, file.partial_path(), fs::copy_options::overwrite_existing, ec);
        KASCADE_CHECK(!ec, "cannot copy \"{}\" to \"{}\": {}", from.string(), to.string(), ec.message());
    }
    file.commit();
}

}  // namespace kascade
