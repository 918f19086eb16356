// io/store/partial_file.cpp: partial files and atomic copies (see partial_file.h).
#include "io/store/partial_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace kascade {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPartialMarker = ".partial-";

void fsync_file(const fs::path& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    KASCADE_CHECK(fd >= 0, "cannot open \"{}\" to sync it: {}", path.string(), std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    KASCADE_CHECK(rc == 0, "cannot sync \"{}\": {}", path.string(), std::strerror(err));
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

void copy_file_atomic(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::create_directories(to.parent_path(), ec);
    KASCADE_CHECK(!ec, "cannot create folder \"{}\": {}", to.parent_path().string(), ec.message());
    if (fs::equivalent(from, to, ec)) return;  // already a link to it
    const fs::path partial = partial_path_for(to);
    fs::remove(partial, ec);
    fs::create_hard_link(from, partial, ec);
    if (ec) {
        fs::copy_file(from, partial, fs::copy_options::overwrite_existing, ec);
        KASCADE_CHECK(!ec, "cannot copy \"{}\" to \"{}\": {}", from.string(), partial.string(), ec.message());
        fsync_file(partial, O_RDONLY);
    }
    fs::rename(partial, to, ec);
    // rename() does nothing when both names are links to one file (another process linked it meanwhile).
    std::error_code ignored;
    fs::remove(partial, ignored);
    if (ec) {
        KASCADE_FAIL("cannot rename \"{}\" to \"{}\": {}", partial.string(), to.string(), ec.message());
    }
    fsync_file(to.parent_path(), O_RDONLY | O_DIRECTORY);
}

}  // namespace kascade
