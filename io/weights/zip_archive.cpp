// io/weights/zip_archive.cpp: ZipArchive over libzip, with a libzip source that reads the memory-mapped file.
#include "io/weights/zip_archive.h"

#include <zip.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace kascade {

// libzip reads the archive through this source, so the file is mapped once and libzip's reads of an entry's data
// reveal where that data lies in the mapping (stored_data_offset).
struct ZipArchive::Source {
    Source(const std::uint8_t* data, std::uint64_t size) : data(data), size(size) { zip_error_init(&error); }
    ~Source() { zip_error_fini(&error); }
    Source(const Source&) = delete;
    Source& operator=(const Source&) = delete;

    static zip_int64_t callback(void* state, void* data, zip_uint64_t length, zip_source_cmd_t command) {
        auto* s = static_cast<Source*>(state);
        switch (command) {
            case ZIP_SOURCE_OPEN:
                s->position = 0;
                return 0;
            case ZIP_SOURCE_READ: {
                const std::uint64_t n = std::min<std::uint64_t>(length, s->size - s->position);
                if (n > 0) std::memcpy(data, s->data + s->position, n);
                s->last_read_at = static_cast<std::int64_t>(s->position);
                s->position += n;
                return static_cast<zip_int64_t>(n);
            }
            case ZIP_SOURCE_CLOSE:
            case ZIP_SOURCE_FREE:
                return 0;
            case ZIP_SOURCE_STAT: {
                zip_stat_t* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, length, &s->error);
                if (st == nullptr) return -1;
                zip_stat_init(st);
                st->valid = ZIP_STAT_SIZE;
                st->size = s->size;
                return sizeof(zip_stat_t);
            }
            case ZIP_SOURCE_ERROR:
                return zip_error_to_data(&s->error, data, length);
            case ZIP_SOURCE_SEEK: {
                const zip_int64_t to = zip_source_seek_compute_offset(s->position, s->size, data, length, &s->error);
                if (to < 0) return -1;
                s->position = static_cast<std::uint64_t>(to);
                return 0;
            }
            case ZIP_SOURCE_TELL:
                return static_cast<zip_int64_t>(s->position);
            case ZIP_SOURCE_SUPPORTS:
                return ZIP_SOURCE_SUPPORTS_SEEKABLE;
            default:
                zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0);
                return -1;
        }
    }

    const std::uint8_t* data;
    std::uint64_t size;
    std::uint64_t position = 0;
    std::int64_t last_read_at = -1;  ///< where the latest read began
    zip_error_t error;
};

void ZipArchive::Discard::operator()(zip* archive) const {
    zip_discard(archive);
}

namespace {

// Closes a zip_file_t when the scope ends.
struct FileCloser {
    void operator()(zip_file_t* file) const { zip_fclose(file); }
};
using ZipFile = std::unique_ptr<zip_file_t, FileCloser>;

// Deflate cannot expand data more than about 1032-fold; a larger declared size is a damaged or hostile header, refused
// before any memory is allocated for it.
constexpr std::uint64_t kMaxInflateRatio = 1100;

}  // namespace

ZipArchive::ZipArchive(const std::filesystem::path& path)
    : file_(path), source_(std::make_unique<Source>(file_.data(), file_.size())) {
    const std::string where = path.string();
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_function_create(&Source::callback, source_.get(), &error);
    KASCADE_CHECK(source != nullptr, "{}: libzip cannot read it: {}", where, zip_error_strerror(&error));
    archive_.reset(zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error));
    if (archive_ == nullptr) {
        const std::string reason = zip_error_strerror(&error);
        zip_error_fini(&error);
        zip_source_free(source);
        KASCADE_FAIL("{}: not a readable zip archive ({}); a PyTorch checkpoint is one: is the file truncated?", where,
                     reason);
    }
    zip_error_fini(&error);

    const zip_int64_t n = zip_get_num_entries(archive_.get(), 0);
    for (zip_int64_t i = 0; i < n; ++i) {
        const char* name = zip_get_name(archive_.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
        KASCADE_CHECK(name != nullptr, "{}: the name of entry {} cannot be read: {}", where, i,
                      zip_strerror(archive_.get()));
        KASCADE_CHECK(index_.emplace(name, static_cast<std::uint64_t>(i)).second, "{}: entry {} appears twice", where,
                      name);
        names_.emplace_back(name);
    }
}

ZipArchive::~ZipArchive() = default;

std::span<const std::uint8_t> ZipArchive::entry(const std::string& name) {
    const auto it = index_.find(name);
    KASCADE_CHECK(it != index_.end(), "{}: entry {} is missing", path().string(), name);
    zip_stat_t st;
    zip_stat_init(&st);
    KASCADE_CHECK(zip_stat_index(archive_.get(), it->second, 0, &st) == 0, "{}: entry {}: {}", path().string(), name,
                  zip_strerror(archive_.get()));
    KASCADE_CHECK(st.encryption_method == ZIP_EM_NONE, "{}: entry {} is encrypted", path().string(), name);
    if (st.size == 0) return {};
    if (st.comp_method == ZIP_CM_STORE) {
        const std::int64_t offset = stored_data_offset(it->second, st.size, name);
        if (offset >= 0) return {file_.data() + offset, static_cast<std::size_t>(st.size)};
    }
    KASCADE_CHECK(st.comp_size <= file_.size() && st.size / kMaxInflateRatio <= st.comp_size,
                  "{}: entry {} declares {} bytes from {} compressed bytes in a file of {} bytes: the archive is "
                  "damaged",
                  path().string(), name, st.size, st.comp_size, file_.size());
    return inflate(it->second, st.size, name);
}

std::int64_t ZipArchive::stored_data_offset(std::uint64_t index, std::uint64_t size, const std::string& name) {
    // libzip does not tell where an entry's data starts, but reading it through Source does: the read of its first
    // bytes begins there. The bytes read must then equal the mapping's at both ends of the entry, which confirms the
    // place (a layer of libzip that buffered or read elsewhere would fail this, and the entry is then inflated).
    const ZipFile file(zip_fopen_index(archive_.get(), index, 0));
    KASCADE_CHECK(file != nullptr, "{}: entry {} cannot be opened: {}", path().string(), name,
                  zip_strerror(archive_.get()));
    constexpr std::uint64_t kProbe = 64;
    const std::uint64_t probe = std::min(size, kProbe);
    std::uint8_t bytes[kProbe];
    source_->last_read_at = -1;
    if (zip_fread(file.get(), bytes, probe) != static_cast<zip_int64_t>(probe)) return -1;
    const std::int64_t offset = source_->last_read_at;
    if (offset < 0 || static_cast<std::uint64_t>(offset) > file_.size() ||
        size > file_.size() - static_cast<std::uint64_t>(offset)) {
        return -1;
    }
    const std::uint8_t* data = file_.data() + offset;
    if (std::memcmp(data, bytes, probe) != 0) return -1;
    if (size > probe) {
        if (zip_fseek(file.get(), static_cast<zip_int64_t>(size - probe), SEEK_SET) != 0) return -1;
        if (zip_fread(file.get(), bytes, probe) != static_cast<zip_int64_t>(probe)) return -1;
        if (std::memcmp(data + size - probe, bytes, probe) != 0) return -1;
    }
    return offset;
}

std::span<const std::uint8_t> ZipArchive::inflate(std::uint64_t index, std::uint64_t size, const std::string& name) {
    const ZipFile file(zip_fopen_index(archive_.get(), index, 0));
    KASCADE_CHECK(file != nullptr, "{}: entry {} cannot be opened: {}", path().string(), name,
                  zip_strerror(archive_.get()));
    auto buffer = std::make_unique_for_overwrite<std::uint8_t[]>(size);
    std::uint64_t done = 0;
    while (done < size) {
        const zip_int64_t n = zip_fread(file.get(), buffer.get() + done, size - done);
        KASCADE_CHECK(n > 0, "{}: entry {}: {} after {} of its {} bytes", path().string(), name,
                      n < 0 ? zip_file_strerror(file.get()) : "the data ends", done, size);
        done += static_cast<std::uint64_t>(n);
    }
    // One more read reaches the end of the entry, where libzip compares the CRC.
    std::uint8_t extra = 0;
    const zip_int64_t n = zip_fread(file.get(), &extra, 1);
    KASCADE_CHECK(n == 0, "{}: entry {}: {}", path().string(), name,
                  n < 0 ? zip_file_strerror(file.get()) : "more data than its declared size");
    inflated_.push_back(std::move(buffer));
    return {inflated_.back().get(), static_cast<std::size_t>(size)};
}

}  // namespace kascade
