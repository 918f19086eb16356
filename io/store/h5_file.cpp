// io/store/h5_file.cpp: the HDF5 artifact layer (see h5_file.h).
#include "io/store/h5_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <utility>

#include "base/error.h"
#include "io/atomic_file.h"
#include "io/file_util.h"

namespace kascade {

static_assert(std::is_same_v<hid_t, std::int64_t>, "h5_file.h stores hid_t as std::int64_t (HDF5 >= 1.10)");

namespace {

namespace fs = std::filesystem;

// Chunks of compressed datasets are at most this big: small enough to read one window/layer cheaply.
constexpr std::size_t kMaxChunkBytes = std::size_t{1} << 20;

// HDF5 prints its error stack to stderr by default; we report errors ourselves, once, as kascade::Error.
// HDF5 also closes, at exit, what is still open; after a failed write (a full disk) that is a file whose close
// already failed, and closing it again crashes. Every file kascade keeps is closed by commit() first, so the exit
// handler is left out (before anything else, which would register it).
void silence_hdf5() {
    static std::once_flag once;
    std::call_once(once, [] {
        H5dont_atexit();
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    });
}

herr_t collect_error(unsigned /*n*/, const H5E_error2_t* err, void* data) {
    auto* messages = static_cast<std::vector<std::string>*>(data);
    if (err->desc != nullptr && err->desc[0] != '\0') messages->emplace_back(err->desc);
    return 0;
}

// The innermost (most specific) message of HDF5's current error stack, e.g. "truncated file: eof = 100, ...".
std::string hdf5_reason() {
    std::vector<std::string> messages;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
    H5Eclear2(H5E_DEFAULT);
    if (messages.empty()) return "unknown HDF5 error";
    std::string reason = messages.back();
    // A failed read or write of the file driver spans lines of detail (time, buffer address, offsets); keep its
    // first phrase and the system's message, e.g. "file write failed: No space left on device".
    const std::string_view marker = "error message = '";
    const size_t at = reason.find(marker);
    if (at != std::string::npos) {
        const size_t begin = at + marker.size();
        const size_t end = reason.find('\'', begin);
        reason = reason.substr(0, reason.find(':')) + ": " + reason.substr(begin, end - begin);
    }
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    return reason;
}

// Throws "<context>: <HDF5 reason>" if an HDF5 call returned a negative id / status.
template <class... Args>
void h5_check(std::int64_t status, fmt::format_string<Args...> context, Args&&... args) {
    if (status < 0) KASCADE_FAIL("{}: {}", fmt::format(context, std::forward<Args>(args)...), hdf5_reason());
}

// Closes an HDF5 id of any kind when it goes out of scope.
class IdGuard {
  public:
    IdGuard(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
    ~IdGuard() {
        if (id_ >= 0) close_(id_);
    }
    IdGuard(const IdGuard&) = delete;
    IdGuard& operator=(const IdGuard&) = delete;
    hid_t get() const { return id_; }

  private:
    hid_t id_;
    herr_t (*close_)(hid_t);
};

hid_t memory_type(H5DType dtype) {
    switch (dtype) {
        case H5DType::Float32:
            return H5T_NATIVE_FLOAT;
        case H5DType::Float64:
            return H5T_NATIVE_DOUBLE;
        case H5DType::Int8:
            return H5T_NATIVE_INT8;
        case H5DType::Int32:
            return H5T_NATIVE_INT32;
        case H5DType::Int64:
            return H5T_NATIVE_INT64;
        case H5DType::UInt8:
            return H5T_NATIVE_UINT8;
    }
    KASCADE_ASSERT(false);
}

// Little-endian standard types on disk, whatever the host, so files read the same everywhere.
hid_t file_type(H5DType dtype) {
    switch (dtype) {
        case H5DType::Float32:
            return H5T_IEEE_F32LE;
        case H5DType::Float64:
            return H5T_IEEE_F64LE;
        case H5DType::Int8:
            return H5T_STD_I8LE;
        case H5DType::Int32:
            return H5T_STD_I32LE;
        case H5DType::Int64:
            return H5T_STD_I64LE;
        case H5DType::UInt8:
            return H5T_STD_U8LE;
    }
    KASCADE_ASSERT(false);
}

bool is_real(H5DType dtype) {
    return dtype == H5DType::Float32 || dtype == H5DType::Float64;
}

// Checks that a stored type can be read as `wanted` (same kind: integer or real) and names it otherwise.
void check_kind(hid_t stored, H5DType wanted, std::string_view what) {
    const H5T_class_t cls = H5Tget_class(stored);
    const bool ok = is_real(wanted) ? cls == H5T_FLOAT : cls == H5T_INTEGER;
    KASCADE_CHECK(ok, "{} is {}, expected {}", what,
                  cls == H5T_FLOAT     ? "real"
                  : cls == H5T_INTEGER ? "integer"
                  : cls == H5T_STRING  ? "a string"
                                       : "of another type",
                  h5_dtype_name(wanted));
}

std::vector<hsize_t> to_dims(const std::vector<std::int64_t>& shape, std::string_view what) {
    std::vector<hsize_t> dims;
    for (std::int64_t d : shape) {
        KASCADE_CHECK(d >= 0, "{}: negative dimension {} in shape", what, d);
        dims.push_back(static_cast<hsize_t>(d));
    }
    return dims;
}

// Opens attribute `attr` of `obj`, or throws naming it.
hid_t open_attr(hid_t obj, std::string_view attr, std::string_view where) {
    const std::string name(attr);
    const htri_t exists = H5Aexists(obj, name.c_str());
    h5_check(exists, "{}: cannot look up attribute {}", where, attr);
    KASCADE_CHECK(exists > 0, "{}: attribute {} is missing", where, attr);
    const hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
    h5_check(a, "{}: cannot open attribute {}", where, attr);
    return a;
}

// Creates attribute `attr` (replacing an existing one) of the given type and space, and writes `data`.
void write_attr(hid_t obj, std::string_view attr, hid_t type, hid_t mem_type, hid_t space, const void* data,
                std::string_view where) {
    const std::string name(attr);
    const htri_t exists = H5Aexists(obj, name.c_str());
    h5_check(exists, "{}: cannot look up attribute {}", where, attr);
    if (exists > 0) h5_check(H5Adelete(obj, name.c_str()), "{}: cannot replace attribute {}", where, attr);
    IdGuard a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    h5_check(a.get(), "{}: cannot create attribute {}", where, attr);
    h5_check(H5Awrite(a.get(), mem_type, data), "{}: cannot write attribute {}", where, attr);
}

// Reads a scalar numeric attribute into *out (mem_type converts).
void read_scalar_attr(hid_t obj, std::string_view attr, H5DType dtype, void* out, std::string_view where) {
    IdGuard a(open_attr(obj, attr, where), H5Aclose);
    IdGuard type(H5Aget_type(a.get()), H5Tclose);
    IdGuard space(H5Aget_space(a.get()), H5Sclose);
    const std::string what = fmt::format("{}: attribute {}", where, attr);
    check_kind(type.get(), dtype, what);
    KASCADE_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "{} is an array, expected a scalar", what);
    h5_check(H5Aread(a.get(), memory_type(dtype), out), "cannot read {}", what);
}

/// Creates `partial`; errors name `shown`, the file being written, never the partial file's internal name.
hid_t create_file(const fs::path& partial, const fs::path& shown) {
    silence_hdf5();
    IdGuard fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    // STRONG: closing the file closes every object still open in it, so commit() really finishes the file.
    h5_check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), "{}: cannot set close degree", shown.string());
    const hid_t file = H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
    h5_check(file, "cannot create HDF5 file \"{}\"", shown.string());
    return file;
}

hid_t open_file(const fs::path& path) {
    silence_hdf5();
    KASCADE_CHECK(::access(path.c_str(), R_OK) == 0, "cannot open HDF5 file \"{}\": {}", path.string(),
                  std::strerror(errno));
    check_regular_file(path);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    h5_check(file, "cannot open HDF5 file \"{}\"", path.string());
    return file;
}

hid_t open_root(hid_t file, const fs::path& path) {
    const hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    if (root < 0) {
        const std::string reason = hdf5_reason();
        H5Fclose(file);
        KASCADE_FAIL("{}: cannot open the root group: {}", path.string(), reason);
    }
    return root;
}

}  // namespace

std::string_view h5_dtype_name(H5DType dtype) {
    switch (dtype) {
        case H5DType::Float32:
            return "float32";
        case H5DType::Float64:
            return "float64";
        case H5DType::Int8:
            return "int8";
        case H5DType::Int32:
            return "int32";
        case H5DType::Int64:
            return "int64";
        case H5DType::UInt8:
            return "uint8";
    }
    KASCADE_ASSERT(false);
}

// ---- H5Object ----

H5Object::H5Object(std::int64_t id, std::string file, std::string name)
    : id_(id), file_(std::move(file)), name_(std::move(name)) {}

H5Object::H5Object(H5Object&& other) noexcept
    : id_(std::exchange(other.id_, -1)), file_(std::move(other.file_)), name_(std::move(other.name_)) {}

H5Object& H5Object::operator=(H5Object&& other) noexcept {
    if (this != &other) {
        if (id_ >= 0) H5Oclose(id_);
        id_ = std::exchange(other.id_, -1);
        file_ = std::move(other.file_);
        name_ = std::move(other.name_);
    }
    return *this;
}

H5Object::~H5Object() {
    // After H5ArtifactWriter::commit() the file (and with it this id) is already closed; HDF5 then just reports
    // an invalid id, which is harmless and not printed.
    if (id_ >= 0) H5Oclose(id_);
}

std::string H5Object::where() const {
    return fmt::format("{}: {}", file_, name_);
}

bool H5Object::has_attr(std::string_view attr) const {
    const htri_t exists = H5Aexists(id_, std::string(attr).c_str());
    h5_check(exists, "{}: cannot look up attribute {}", where(), attr);
    return exists > 0;
}

void H5Object::set_attr(std::string_view attr, std::int64_t value) {
    IdGuard space(H5Screate(H5S_SCALAR), H5Sclose);
    write_attr(id_, attr, H5T_STD_I64LE, H5T_NATIVE_INT64, space.get(), &value, where());
}

void H5Object::set_attr(std::string_view attr, double value) {
    IdGuard space(H5Screate(H5S_SCALAR), H5Sclose);
    write_attr(id_, attr, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, space.get(), &value, where());
}

void H5Object::set_attr(std::string_view attr, std::string_view value) {
    // Variable-length UTF-8: h5py reads it as str, h5dump prints it as text.
    IdGuard type(H5Tcopy(H5T_C_S1), H5Tclose);
    h5_check(H5Tset_size(type.get(), H5T_VARIABLE), "{}: string type", where());
    h5_check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "{}: string type", where());
    IdGuard space(H5Screate(H5S_SCALAR), H5Sclose);
    const std::string copy(value);
    const char* ptr = copy.c_str();
    write_attr(id_, attr, type.get(), type.get(), space.get(), &ptr, where());
}

void H5Object::write_array_attr(std::string_view attr, H5DType dtype, const void* data, std::size_t n) {
    const hsize_t dims[1] = {static_cast<hsize_t>(n)};
    IdGuard space(H5Screate_simple(1, dims, nullptr), H5Sclose);
    write_attr(id_, attr, file_type(dtype), memory_type(dtype), space.get(), data, where());
}

std::int64_t H5Object::attr_int(std::string_view attr) const {
    std::int64_t value = 0;
    read_scalar_attr(id_, attr, H5DType::Int64, &value, where());
    return value;
}

double H5Object::attr_double(std::string_view attr) const {
    IdGuard a(open_attr(id_, attr, where()), H5Aclose);
    IdGuard type(H5Aget_type(a.get()), H5Tclose);
    if (H5Tget_class(type.get()) == H5T_INTEGER) return static_cast<double>(attr_int(attr));
    double value = 0;
    read_scalar_attr(id_, attr, H5DType::Float64, &value, where());
    return value;
}

std::string H5Object::attr_string(std::string_view attr) const {
    IdGuard a(open_attr(id_, attr, where()), H5Aclose);
    IdGuard type(H5Aget_type(a.get()), H5Tclose);
    IdGuard space(H5Aget_space(a.get()), H5Sclose);
    const std::string what = fmt::format("{}: attribute {}", where(), attr);
    KASCADE_CHECK(H5Tget_class(type.get()) == H5T_STRING, "{} is not a string", what);
    KASCADE_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "{} is an array, expected one string", what);
    const htri_t variable = H5Tis_variable_str(type.get());
    h5_check(variable, "cannot read {}", what);
    IdGuard mem(H5Tcopy(H5T_C_S1), H5Tclose);
    // HDF5 converts no strings between character sets: read in the one stored (ASCII from some writers, UTF-8 here).
    h5_check(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), "cannot read {}", what);
    if (variable > 0) {
        h5_check(H5Tset_size(mem.get(), H5T_VARIABLE), "cannot read {}", what);
        char* ptr = nullptr;
        h5_check(H5Aread(a.get(), mem.get(), &ptr), "cannot read {}", what);
        std::string value = ptr != nullptr ? std::string(ptr) : std::string();
        H5free_memory(ptr);
        return value;
    }
    // Fixed-length strings (as written by some tools): NUL- or space-padded.
    const std::size_t size = H5Tget_size(type.get());
    h5_check(H5Tset_size(mem.get(), size), "cannot read {}", what);
    std::string value(size, '\0');
    h5_check(H5Aread(a.get(), mem.get(), value.data()), "cannot read {}", what);
    value.resize(std::min(value.find('\0'), value.size()));
    return value;
}

std::size_t H5Object::attr_element_count(std::string_view attr) const {
    IdGuard a(open_attr(id_, attr, where()), H5Aclose);
    IdGuard space(H5Aget_space(a.get()), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    h5_check(n, "{}: cannot read the size of attribute {}", where(), attr);
    return static_cast<std::size_t>(n);
}

void H5Object::read_array_attr(std::string_view attr, H5DType dtype, void* data, std::size_t n) const {
    IdGuard a(open_attr(id_, attr, where()), H5Aclose);
    IdGuard type(H5Aget_type(a.get()), H5Tclose);
    IdGuard space(H5Aget_space(a.get()), H5Sclose);
    const std::string what = fmt::format("{}: attribute {}", where(), attr);
    check_kind(type.get(), dtype, what);
    KASCADE_ASSERT(H5Sget_simple_extent_npoints(space.get()) == static_cast<hssize_t>(n));
    h5_check(H5Aread(a.get(), memory_type(dtype), data), "cannot read {}", what);
}

// ---- H5Dataset ----

std::vector<std::int64_t> H5Dataset::shape() const {
    IdGuard space(H5Dget_space(id()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    h5_check(rank, "{}: cannot read the shape", where());
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    h5_check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "{}: cannot read the shape", where());
    return {dims.begin(), dims.end()};
}

std::int64_t H5Dataset::size() const {
    const std::vector<std::int64_t> s = shape();
    return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

std::int64_t H5Dataset::row_size() const {
    const std::vector<std::int64_t> s = shape();
    KASCADE_CHECK(!s.empty(), "{}: a scalar dataset has no rows", where());
    return std::accumulate(s.begin() + 1, s.end(), std::int64_t{1}, std::multiplies<>());
}

H5DType H5Dataset::dtype() const {
    IdGuard type(H5Dget_type(id()), H5Tclose);
    h5_check(type.get(), "{}: cannot read the element type", where());
    const H5T_class_t cls = H5Tget_class(type.get());
    const std::size_t size = H5Tget_size(type.get());
    if (cls == H5T_FLOAT && size == 4) return H5DType::Float32;
    if (cls == H5T_FLOAT && size == 8) return H5DType::Float64;
    if (cls == H5T_INTEGER) {
        const bool is_signed = H5Tget_sign(type.get()) == H5T_SGN_2;
        if (size == 1) return is_signed ? H5DType::Int8 : H5DType::UInt8;
        if (size == 4 && is_signed) return H5DType::Int32;
        if (size == 8 && is_signed) return H5DType::Int64;
    }
    KASCADE_FAIL(
        "{}: element type (HDF5 class {}, {} bytes) is not one kascade reads "
        "(float32, float64, int8, int32, int64, uint8)",
        where(), static_cast<int>(cls), size);
}

namespace {

// Selects rows [first, first + count) of the first dimension in file_space and returns the matching memory space;
// count < 0 selects everything and returns -1 (then both spaces are H5S_ALL).
hid_t select_rows(hid_t file_space, std::int64_t first, std::int64_t count, const std::string& where) {
    if (count < 0) return -1;
    const int rank = H5Sget_simple_extent_ndims(file_space);
    KASCADE_CHECK(rank >= 1, "{}: a scalar dataset has no rows", where);
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(file_space, dims.data(), nullptr);
    KASCADE_CHECK(first >= 0 && first + count <= static_cast<std::int64_t>(dims[0]),
                  "{}: rows [{}, {}) out of range [0, {})", where, first, first + count, dims[0]);
    std::vector<hsize_t> start(dims.size(), 0);
    start[0] = static_cast<hsize_t>(first);
    dims[0] = static_cast<hsize_t>(count);
    h5_check(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, dims.data(), nullptr),
             "{}: cannot select rows", where);
    const hid_t mem_space = H5Screate_simple(rank, dims.data(), nullptr);
    h5_check(mem_space, "{}: cannot create a memory space", where);
    return mem_space;
}

}  // namespace

void H5Dataset::read_raw(H5DType dtype, void* out, std::int64_t first, std::int64_t count) const {
    IdGuard type(H5Dget_type(id()), H5Tclose);
    check_kind(type.get(), dtype, fmt::format("{}: dataset", where()));
    IdGuard file_space(H5Dget_space(id()), H5Sclose);
    IdGuard mem_space(select_rows(file_space.get(), first, count, where()), H5Sclose);
    if (count == 0) return;
    h5_check(H5Dread(id(), memory_type(dtype), count < 0 ? H5S_ALL : mem_space.get(),
                     count < 0 ? H5S_ALL : file_space.get(), H5P_DEFAULT, out),
             "{}: cannot read the data", where());
}

void H5Dataset::write_raw(H5DType dtype, const void* data, std::size_t n, std::int64_t first) {
    std::int64_t count = -1;
    if (first < 0) {
        KASCADE_CHECK(static_cast<std::int64_t>(n) == size(), "{}: {} values given for shape with {} elements", where(),
                      n, size());
    } else {
        const std::int64_t row = row_size();
        KASCADE_CHECK(row > 0 && static_cast<std::int64_t>(n) % row == 0,
                      "{}: {} values is not a whole number of rows of {} elements", where(), n, row);
        count = static_cast<std::int64_t>(n) / row;
    }
    IdGuard file_space(H5Dget_space(id()), H5Sclose);
    IdGuard mem_space(select_rows(file_space.get(), first, count, where()), H5Sclose);
    if (n == 0) return;
    h5_check(H5Dwrite(id(), memory_type(dtype), count < 0 ? H5S_ALL : mem_space.get(),
                      count < 0 ? H5S_ALL : file_space.get(), H5P_DEFAULT, data),
             "{}: cannot write the data", where());
}

// ---- H5Group ----

std::string H5Group::child_name(std::string_view child) const {
    return name() == "/" ? fmt::format("/{}", child) : fmt::format("{}/{}", name(), child);
}

H5Group H5Group::create_group(std::string_view name) {
    const hid_t g = H5Gcreate2(id(), std::string(name).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    h5_check(g, "{}: cannot create group {}", file(), child_name(name));
    return H5Group(g, file(), child_name(name));
}

H5Group H5Group::open_group(std::string_view name) const {
    KASCADE_CHECK(has(name), "{}: group {} is missing", file(), child_name(name));
    const hid_t g = H5Gopen2(id(), std::string(name).c_str(), H5P_DEFAULT);
    h5_check(g, "{}: cannot open group {}", file(), child_name(name));
    return H5Group(g, file(), child_name(name));
}

bool H5Group::has(std::string_view name) const {
    const htri_t exists = H5Lexists(id(), std::string(name).c_str(), H5P_DEFAULT);
    h5_check(exists, "{}: cannot look up {}", file(), child_name(name));
    return exists > 0;
}

std::vector<std::string> H5Group::children() const {
    std::vector<std::string> names;
    auto collect = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
    };
    h5_check(H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names), "{}: cannot list {}", file(),
             name());
    return names;
}

H5Dataset H5Group::create_dataset(std::string_view name, H5DType dtype, const std::vector<std::int64_t>& shape,
                                  const H5DatasetOptions& options) {
    const std::string full = child_name(name);
    const std::vector<hsize_t> dims = to_dims(shape, fmt::format("{}: {}", file(), full));
    IdGuard space(
        dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
        H5Sclose);
    h5_check(space.get(), "{}: cannot create the dataspace of {}", file(), full);
    IdGuard dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    const bool all_positive = std::all_of(dims.begin(), dims.end(), [](hsize_t d) { return d > 0; });
    if (options.compress && !dims.empty() && all_positive) {
        // Keep trailing dimensions whole and halve the leading ones until a chunk fits kMaxChunkBytes.
        std::vector<hsize_t> chunk = dims;
        const std::size_t elem = H5Tget_size(file_type(dtype));
        auto chunk_bytes = [&] { return std::accumulate(chunk.begin(), chunk.end(), elem, std::multiplies<>()); };
        for (std::size_t d = 0; d < chunk.size() && chunk_bytes() > kMaxChunkBytes; ++d) {
            while (chunk[d] > 1 && chunk_bytes() > kMaxChunkBytes) chunk[d] = (chunk[d] + 1) / 2;
        }
        h5_check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), "{}: chunking {}", file(),
                 full);
        h5_check(H5Pset_shuffle(dcpl.get()), "{}: shuffle filter on {}", file(), full);
        h5_check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(std::clamp(options.gzip_level, 1, 9))),
                 "{}: gzip filter on {}", file(), full);
    }
    const hid_t ds = H5Dcreate2(id(), std::string(name).c_str(), file_type(dtype), space.get(), H5P_DEFAULT, dcpl.get(),
                                H5P_DEFAULT);
    h5_check(ds, "{}: cannot create dataset {}", file(), full);
    return H5Dataset(ds, file(), full);
}

H5Dataset H5Group::open_dataset(std::string_view name) const {
    KASCADE_CHECK(has(name), "{}: dataset {} is missing", file(), child_name(name));
    const hid_t ds = H5Dopen2(id(), std::string(name).c_str(), H5P_DEFAULT);
    h5_check(ds, "{}: cannot open dataset {}", file(), child_name(name));
    return H5Dataset(ds, file(), child_name(name));
}

// ---- Artifact header ----

namespace {

// The header fields in the order they are written; names are the attribute names.
constexpr std::pair<const char*, std::string ArtifactHeader::*> kHeaderFields[] = {
    {"stage", &ArtifactHeader::stage},
    {"key", &ArtifactHeader::key},
    {"input_keys", &ArtifactHeader::input_keys_json},
    {"params", &ArtifactHeader::params_json},
    {"model_hash", &ArtifactHeader::model_hash},
    {"text_hash", &ArtifactHeader::text_hash},
    {"tokenizer_hash", &ArtifactHeader::tokenizer_hash},
    {"kascade_version", &ArtifactHeader::kascade_version},
    {"git_commit", &ArtifactHeader::git_commit},
    {"created_at", &ArtifactHeader::created_at},
};

}  // namespace

void write_artifact_header(H5Group& root, const ArtifactHeader& header) {
    for (const auto& [name, member] : kHeaderFields) root.set_attr(name, std::string_view(header.*member));
}

ArtifactHeader read_artifact_header(const H5Group& root) {
    ArtifactHeader header;
    for (const auto& [name, member] : kHeaderFields) header.*member = root.attr_string(name);
    return header;
}

// ---- H5ArtifactWriter ----

H5ArtifactWriter::H5ArtifactWriter(fs::path final_path, std::int64_t format_version)
    : file_(std::move(final_path)),
      file_id_(create_file(file_.partial_path(), file_.final_path())),
      root_(open_root(file_id_, file_.final_path()), file_.final_path().string(), "/") {
    try {
        root_.set_attr("format", kArtifactFormat);
        root_.set_attr("format_version", format_version);
    } catch (...) {
        close_file();
        throw;
    }
}

void H5ArtifactWriter::close_file() {
    root_ = H5Group(-1, root_.file(), "/");
    if (file_id_ >= 0) {
        H5Fclose(file_id_);
        file_id_ = -1;
    }
}

H5ArtifactWriter::~H5ArtifactWriter() {
    if (!committed_) close_file();
}

void H5ArtifactWriter::commit() {
    KASCADE_ASSERT(!committed_ && file_id_ >= 0);
    h5_check(H5Fflush(file_id_, H5F_SCOPE_GLOBAL), "cannot write HDF5 file \"{}\"", final_path().string());
    root_ = H5Group(-1, root_.file(), "/");
    const herr_t closed = H5Fclose(file_id_);
    file_id_ = -1;
    h5_check(closed, "cannot close HDF5 file \"{}\"", final_path().string());
    file_.commit();
    committed_ = true;
}

// ---- H5ArtifactReader ----

void verify_artifact_checksum(const fs::path& file, const ArtifactRecord& record) {
    if (!record.checksum) return;
    const std::string found = hash_file_hex(file);
    KASCADE_CHECK(
        found == *record.checksum,
        "{}: damaged or replaced: its checksum is {}, {} when it was stored; delete it and run its stage again",
        file.string(), found, *record.checksum);
}

namespace {
fs::path verified_artifact_file(const fs::path& results_dir, const ArtifactRecord& record) {
    fs::path file = results_dir / record.path;
    verify_artifact_checksum(file, record);
    return file;
}
}  // namespace

H5ArtifactReader::H5ArtifactReader(const fs::path& results_dir, const ArtifactRecord& record, std::int64_t min_version,
                                   std::int64_t max_version)
    : H5ArtifactReader(verified_artifact_file(results_dir, record), min_version, max_version, record.stage,
                       record.key) {}

H5ArtifactReader::H5ArtifactReader(fs::path path, std::int64_t min_version, std::int64_t max_version,
                                   std::string_view expected_stage, std::string_view expected_key)
    : path_(std::move(path)), file_id_(open_file(path_)), root_(open_root(file_id_, path_), path_.string(), "/") {
    try {
        const std::string p = path_.string();
        KASCADE_CHECK(root_.has_attr("format"), "{}: attribute format is missing; not a kascade artifact", p);
        const std::string format = root_.attr_string("format");
        KASCADE_CHECK(format == kArtifactFormat, "{}: attribute format is '{}', expected '{}'", p, format,
                      kArtifactFormat);
        KASCADE_CHECK(root_.has_attr("format_version"), "{}: attribute format_version is missing", p);
        format_version_ = root_.attr_int("format_version");
        KASCADE_CHECK(format_version_ >= min_version && format_version_ <= max_version,
                      "{}: attribute format_version is {}, this kascade reads {}", p, format_version_,
                      min_version == max_version ? fmt::format("{}", min_version)
                                                 : fmt::format("{}..{}", min_version, max_version));
        if (!expected_stage.empty()) {
            const std::string stage = root_.attr_string("stage");
            KASCADE_CHECK(stage == expected_stage, "{}: attribute stage is '{}', expected '{}'", p, stage,
                          expected_stage);
        }
        if (!expected_key.empty()) {
            KASCADE_CHECK(root_.has_attr("key"), "{}: attribute key is missing; not a kascade artifact", p);
            const std::string key = root_.attr_string("key");
            KASCADE_CHECK(key == expected_key,
                          "{}: attribute key is '{}', expected '{}' (the file was replaced by another artifact; "
                          "delete it and run again)",
                          p, key, expected_key);
        }
    } catch (...) {
        root_ = H5Group(-1, path_.string(), "/");
        H5Fclose(file_id_);
        throw;
    }
}

H5ArtifactReader::~H5ArtifactReader() {
    root_ = H5Group(-1, path_.string(), "/");
    H5Fclose(file_id_);
}

}  // namespace kascade
