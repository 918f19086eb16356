// io/store/h5_file.h: a small RAII layer over the HDF5 C API for kascade's stage artifacts (layout:
// results/README.md).
//
//  - H5Group / H5Dataset: groups, N-D datasets of float32/float64/int8/int32/int64/uint8 (optionally chunked with
//    shuffle + gzip), and attributes (integer, real, UTF-8 string, 1-D numeric arrays) on files, groups and
//    datasets. Datasets can be written and read whole or in slabs along their first dimension.
//  - H5ArtifactWriter: writes an AtomicFile (io/atomic_file.h): <final>.partial-<host>-<pid>, renamed to <final> on
//    commit(); destroyed without commit() it deletes the partial file, so a crash or an exception never leaves a
//    file that looks complete.
//  - H5ArtifactReader: opens an artifact and refuses it unless its root attribute format is "kascade-artifact" and
//    format_version is in the range the caller reads.
//
// HDF5's own error printing is turned off; every failure throws kascade::Error naming the file, the object and
// HDF5's innermost reason (e.g. "truncated file: eof = 1024, ...").
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "io/atomic_file.h"
#include "io/store/records.h"

namespace kascade {

enum class H5DType { Float32, Float64, Int8, Int32, Int64, UInt8 };

/// The H5DType of a C++ element type (float, double, int8_t, int32_t, int64_t, uint8_t).
template <class T>
constexpr H5DType h5_dtype_of() {
    if constexpr (std::is_same_v<T, float>)
        return H5DType::Float32;
    else if constexpr (std::is_same_v<T, double>)
        return H5DType::Float64;
    else if constexpr (std::is_same_v<T, std::int8_t>)
        return H5DType::Int8;
    else if constexpr (std::is_same_v<T, std::int32_t>)
        return H5DType::Int32;
    else if constexpr (std::is_same_v<T, std::int64_t>)
        return H5DType::Int64;
    else if constexpr (std::is_same_v<T, std::uint8_t>)
        return H5DType::UInt8;
    else
        static_assert(sizeof(T) == 0, "unsupported HDF5 element type");
}

/// "float32", "int64", ...
std::string_view h5_dtype_name(H5DType dtype);

struct H5DatasetOptions {
    bool compress = false;  ///< chunked storage with shuffle + gzip; worth it for big, smooth arrays (tile masses)
    int gzip_level = 4;     ///< 1 (fast) .. 9 (small)
};

/// An open HDF5 object (file root, group or dataset) and its attributes. Move-only; closes itself.
class H5Object {
  public:
    H5Object(const H5Object&) = delete;
    H5Object& operator=(const H5Object&) = delete;
    H5Object(H5Object&& other) noexcept;
    H5Object& operator=(H5Object&& other) noexcept;
    ~H5Object();

    /// The object's path inside the file, e.g. "/layer_00/tile_mass".
    const std::string& name() const { return name_; }
    /// The file it belongs to (for messages).
    const std::string& file() const { return file_; }

    bool has_attr(std::string_view attr) const;
    /// Writes (or overwrites) a scalar attribute: integers as int64, reals as float64, strings as UTF-8.
    void set_attr(std::string_view attr, std::int64_t value);
    void set_attr(std::string_view attr, int value) { set_attr(attr, static_cast<std::int64_t>(value)); }
    void set_attr(std::string_view attr, double value);
    void set_attr(std::string_view attr, std::string_view value);
    void set_attr(std::string_view attr, const char* value) { set_attr(attr, std::string_view(value)); }
    /// Writes a 1-D numeric array attribute.
    template <class T>
    void set_attr_array(std::string_view attr, std::span<const T> values) {
        write_array_attr(attr, h5_dtype_of<T>(), values.data(), values.size());
    }

    /// Reads a scalar attribute; throws naming the file, object and attribute if missing or of another kind.
    std::int64_t attr_int(std::string_view attr) const;
    double attr_double(std::string_view attr) const;  ///< also reads integer attributes
    std::string attr_string(std::string_view attr) const;
    /// Reads a numeric array attribute (of any rank, flattened); HDF5 converts between numeric types.
    template <class T>
    std::vector<T> attr_array(std::string_view attr) const {
        std::vector<T> out(attr_element_count(attr));
        read_array_attr(attr, h5_dtype_of<T>(), out.data(), out.size());
        return out;
    }

  protected:
    H5Object(std::int64_t id, std::string file, std::string name);
    std::int64_t id() const { return id_; }
    /// "file.h5: /group/dataset" for messages.
    std::string where() const;

  private:
    void write_array_attr(std::string_view attr, H5DType dtype, const void* data, std::size_t n);
    std::size_t attr_element_count(std::string_view attr) const;
    void read_array_attr(std::string_view attr, H5DType dtype, void* data, std::size_t n) const;

    std::int64_t id_ = -1;  ///< hid_t
    std::string file_;
    std::string name_;

    friend class H5Group;
    friend class H5ArtifactWriter;
    friend class H5ArtifactReader;
};

class H5Dataset : public H5Object {
  public:
    /// Extent of each dimension; empty for a scalar dataset.
    std::vector<std::int64_t> shape() const;
    /// Product of shape() (1 for a scalar).
    std::int64_t size() const;
    H5DType dtype() const;

    /// Reads the whole dataset in row-major order. T must be of the same kind (integer or real) as the stored
    /// type; HDF5 converts sizes (e.g. int8 on disk into int32).
    template <class T>
    std::vector<T> read() const {
        std::vector<T> out(static_cast<std::size_t>(size()));
        read_raw(h5_dtype_of<T>(), out.data(), 0, -1);
        return out;
    }
    /// Reads rows [first, first + count) of the first dimension (all of the other dimensions).
    template <class T>
    std::vector<T> read_rows(std::int64_t first, std::int64_t count) const {
        std::vector<T> out(static_cast<std::size_t>(count * row_size()));
        read_raw(h5_dtype_of<T>(), out.data(), first, count);
        return out;
    }
    /// Writes rows [first, first + data.size() / row size) of the first dimension of a created dataset.
    template <class T>
    void write_rows(std::int64_t first, std::span<const T> data) {
        write_raw(h5_dtype_of<T>(), data.data(), data.size(), first);
    }

  private:
    using H5Object::H5Object;
    std::int64_t row_size() const;  ///< elements per index of the first dimension
    void read_raw(H5DType dtype, void* out, std::int64_t first, std::int64_t count) const;
    void write_raw(H5DType dtype, const void* data, std::size_t n, std::int64_t first);

    friend class H5Group;
};

class H5Group : public H5Object {
  public:
    H5Group create_group(std::string_view name);
    H5Group open_group(std::string_view name) const;
    /// Whether a direct child (group or dataset) of this name exists.
    bool has(std::string_view name) const;
    /// Names of the direct children, sorted.
    std::vector<std::string> children() const;

    /// Creates a dataset of the given shape (row-major) and writes data (data.size() == product of shape).
    template <class T>
    H5Dataset write_dataset(std::string_view name, std::span<const T> data, const std::vector<std::int64_t>& shape,
                            const H5DatasetOptions& options = {}) {
        H5Dataset ds = create_dataset(name, h5_dtype_of<T>(), shape, options);
        ds.write_raw(h5_dtype_of<T>(), data.data(), data.size(), -1);
        return ds;
    }
    /// Creates a dataset to be filled with H5Dataset::write_rows (unwritten elements read as 0).
    H5Dataset create_dataset(std::string_view name, H5DType dtype, const std::vector<std::int64_t>& shape,
                             const H5DatasetOptions& options = {});
    H5Dataset open_dataset(std::string_view name) const;

  private:
    using H5Object::H5Object;
    std::string child_name(std::string_view child) const;

    friend class H5ArtifactWriter;
    friend class H5ArtifactReader;
};

/// The value of the root attribute `format` of every kascade artifact.
inline constexpr std::string_view kArtifactFormat = "kascade-artifact";

/// The provenance root attributes every artifact carries besides format and format_version (results/README.md).
struct ArtifactHeader {
    std::string stage;            ///< "capture", "similarity" or "schedule"
    std::string key;              ///< content key of this artifact (= artifacts.key)
    std::string input_keys_json;  ///< JSON object of the input artifact keys / hashes
    std::string params_json;      ///< JSON object of the stage parameters
    std::string model_hash;
    std::string text_hash;
    std::string tokenizer_hash;
    std::string kascade_version;
    std::string git_commit;
    std::string created_at;  ///< UTC ISO-8601
};

/// Writes the header as root attributes (one string attribute per field, same names).
void write_artifact_header(H5Group& root, const ArtifactHeader& header);
/// Reads them back; throws naming the file and the missing attribute.
ArtifactHeader read_artifact_header(const H5Group& root);

/// Writes an artifact atomically (see the file comment). Not movable: it owns a file being written.
class H5ArtifactWriter {
  public:
    /// Creates final_path's folder if needed and <final_path>.partial-<host>-<pid> with root attributes
    /// format = "kascade-artifact" and format_version.
    H5ArtifactWriter(std::filesystem::path final_path, std::int64_t format_version);
    ~H5ArtifactWriter();
    H5ArtifactWriter(const H5ArtifactWriter&) = delete;
    H5ArtifactWriter& operator=(const H5ArtifactWriter&) = delete;

    H5Group& root() { return root_; }
    const std::filesystem::path& final_path() const { return file_.final_path(); }
    const std::filesystem::path& partial_path() const { return file_.partial_path(); }

    /// Flushes, closes (every object handle of the file becomes invalid), fsyncs and renames into place.
    void commit();

  private:
    void close_file();

    AtomicFile file_;  ///< first: removes the partial file after the destructor has closed it
    std::int64_t file_id_ = -1;
    H5Group root_;
    bool committed_ = false;
};

/// Throws "<file>: damaged or replaced: ..." unless the file's bytes hash to the checksum its row recorded when it was
/// stored (libhdf5 may crash on a damaged file, so this comes before opening it). Rows without a checksum pass.
void verify_artifact_checksum(const std::filesystem::path& file, const ArtifactRecord& record);

/// Opens an artifact read-only and checks its format attributes.
class H5ArtifactReader {
  public:
    /// Throws "<path>: attribute format_version is 3, this kascade reads 1..2" (and alike for format and, if
    /// expected_stage / expected_key are not empty, stage and key: a file replaced by another artifact), or
    /// "cannot open HDF5 file <path>: <reason>" for a missing, truncated or corrupt file.
    H5ArtifactReader(std::filesystem::path path, std::int64_t min_version, std::int64_t max_version,
                     std::string_view expected_stage = {}, std::string_view expected_key = {});
    /// Opens the artifact of a results database row (its file is results_dir / record.path): first compares the
    /// file's checksum with the row's (verify_artifact_checksum), then its root attributes with the row's stage
    /// and key.
    H5ArtifactReader(const std::filesystem::path& results_dir, const ArtifactRecord& record, std::int64_t min_version,
                     std::int64_t max_version);
    ~H5ArtifactReader();
    H5ArtifactReader(const H5ArtifactReader&) = delete;
    H5ArtifactReader& operator=(const H5ArtifactReader&) = delete;

    const H5Group& root() const { return root_; }
    std::int64_t format_version() const { return format_version_; }
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
    std::int64_t file_id_ = -1;
    H5Group root_;
    std::int64_t format_version_ = 0;
};

}  // namespace kascade
