// io/weights/gguf_file.cpp: parsing and validating a GGUF file's header, metadata and tensor infos.
#include "io/weights/gguf_file.h"

#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/error.h"

namespace kascade {
namespace {

constexpr std::string_view kMagic = "GGUF";
constexpr std::uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;              // arrays of arrays; a deeper nest is a corrupt (or hostile) file
constexpr std::uint64_t kDefaultAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT

constexpr std::array<GgmlTypeTraits, 31> kGgmlTypes = {{
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},
    {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q8_1, "Q8_1", 32, 40},
    {GgmlType::Q2_K, "Q2_K", 256, 84},
    {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},
    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},
    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},
    {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},
    {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},
}};

struct ValueTypeInfo {
    GgufValueType type;
    std::string_view name;
    std::size_t min_bytes;  ///< the size of a fixed-size value; the smallest possible string or array
};

constexpr std::array<ValueTypeInfo, 13> kValueTypes = {{
    {GgufValueType::UInt8, "uint8", 1},
    {GgufValueType::Int8, "int8", 1},
    {GgufValueType::UInt16, "uint16", 2},
    {GgufValueType::Int16, "int16", 2},
    {GgufValueType::UInt32, "uint32", 4},
    {GgufValueType::Int32, "int32", 4},
    {GgufValueType::Float32, "float32", 4},
    {GgufValueType::Bool, "bool", 1},
    {GgufValueType::String, "string", 8},
    {GgufValueType::Array, "array", 12},
    {GgufValueType::UInt64, "uint64", 8},
    {GgufValueType::Int64, "int64", 8},
    {GgufValueType::Float64, "float64", 8},
}};

// Little-endian reads from the mapping, every one checked against the end of the file.
class Cursor {
  public:
    Cursor(std::string file, const std::uint8_t* data, std::size_t size)
        : file_(std::move(file)), data_(data), size_(size) {}

    std::uint64_t offset() const { return offset_; }
    std::size_t remaining() const { return size_ - offset_; }
    const std::string& file() const { return file_; }

    /// `what` says what is read, e.g. "the length of metadata key 3".
    void need(std::size_t bytes, std::string_view what) const {
        KASCADE_CHECK(bytes <= remaining(),
                      "{}: truncated GGUF file: {} at byte {} needs {} bytes, but only {} remain (file size {})", file_,
                      what, offset_, bytes, remaining(), size_);
    }

    template <typename T>
    T read(std::string_view what) {
        need(sizeof(T), what);
        T value;
        std::memcpy(&value, data_ + offset_, sizeof(T));
        offset_ += sizeof(T);
        return value;
    }

    std::string read_string(std::string_view what) {
        const std::uint64_t at = offset_;
        const auto length = read<std::uint64_t>(what);
        KASCADE_CHECK(length <= remaining(),
                      "{}: truncated GGUF file: {} at byte {} declares a string of {} bytes, but only {} remain", file_,
                      what, at, length, remaining());
        std::string text(reinterpret_cast<const char*>(data_ + offset_), length);
        offset_ += length;
        return text;
    }

  private:
    std::string file_;
    const std::uint8_t* data_;
    std::size_t size_;
    std::uint64_t offset_ = 0;
};

const ValueTypeInfo* value_type_info(std::uint32_t number) {
    return number < kValueTypes.size() ? &kValueTypes[number] : nullptr;
}

GgufValueType read_value_type(Cursor& in, const std::string& key, std::string_view role) {
    const std::uint64_t at = in.offset();
    const auto number = in.read<std::uint32_t>(fmt::format("the {} of metadata key \"{}\"", role, key));
    KASCADE_CHECK(value_type_info(number) != nullptr,
                  "{}: metadata key \"{}\" has unknown GGUF value type {} at byte {} (expected 0 to 12)", in.file(),
                  key, number, at);
    return static_cast<GgufValueType>(number);
}

GgufValue read_value(Cursor& in, const std::string& key, GgufValueType type, int depth) {
    GgufValue v;
    v.type = type;
    v.offset = in.offset();
    const std::string what = fmt::format("the value of metadata key \"{}\"", key);
    switch (type) {
        case GgufValueType::UInt8:
            v.integer = in.read<std::uint8_t>(what);
            break;
        case GgufValueType::Int8:
            v.integer = in.read<std::int8_t>(what);
            break;
        case GgufValueType::UInt16:
            v.integer = in.read<std::uint16_t>(what);
            break;
        case GgufValueType::Int16:
            v.integer = in.read<std::int16_t>(what);
            break;
        case GgufValueType::UInt32:
            v.integer = in.read<std::uint32_t>(what);
            break;
        case GgufValueType::Int32:
            v.integer = in.read<std::int32_t>(what);
            break;
        case GgufValueType::UInt64:
            v.integer = static_cast<std::int64_t>(in.read<std::uint64_t>(what));  // checked where read as a number
            break;
        case GgufValueType::Int64:
            v.integer = in.read<std::int64_t>(what);
            break;
        case GgufValueType::Float32:
            v.real = in.read<float>(what);
            break;
        case GgufValueType::Float64:
            v.real = in.read<double>(what);
            break;
        case GgufValueType::Bool: {
            const auto byte = in.read<std::uint8_t>(what);
            KASCADE_CHECK(byte <= 1, "{}: metadata key \"{}\" is a bool of value {} at byte {} (expected 0 or 1)",
                          in.file(), key, byte, v.offset);
            v.integer = byte;
            break;
        }
        case GgufValueType::String:
            v.text = in.read_string(what);
            break;
        case GgufValueType::Array: {
            KASCADE_CHECK(depth < kMaxArrayNesting, "{}: metadata key \"{}\" nests arrays more than {} deep at byte {}",
                          in.file(), key, kMaxArrayNesting, v.offset);
            v.element_type = read_value_type(in, key, "array element type");
            const std::uint64_t count_at = in.offset();
            const auto count = in.read<std::uint64_t>(fmt::format("the array length of metadata key \"{}\"", key));
            // Checked before allocating: a corrupt count must not reserve gigabytes.
            const std::size_t min_bytes = value_type_info(static_cast<std::uint32_t>(v.element_type))->min_bytes;
            KASCADE_CHECK(count <= in.remaining() / min_bytes,
                          "{}: truncated GGUF file: metadata key \"{}\" declares {} array elements of type {} at byte "
                          "{}, but only {} bytes remain",
                          in.file(), key, count, gguf_value_type_name(v.element_type), count_at, in.remaining());
            v.elements.reserve(count);
            for (std::uint64_t i = 0; i < count; ++i) {
                v.elements.push_back(read_value(in, key, v.element_type, depth + 1));
            }
            break;
        }
    }
    return v;
}

std::string type_error(const std::string& file, std::string_view key, const GgufValue& v, std::string_view expected) {
    return fmt::format("{}: metadata key \"{}\" at byte {} is of type {}, expected {}", file, key, v.offset,
                       gguf_value_type_name(v.type), expected);
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType type) {
    const ValueTypeInfo* info = value_type_info(static_cast<std::uint32_t>(type));
    return info == nullptr ? "?" : info->name;
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufValueType::UInt8:
        case GgufValueType::Int8:
        case GgufValueType::UInt16:
        case GgufValueType::Int16:
        case GgufValueType::UInt32:
        case GgufValueType::Int32:
        case GgufValueType::UInt64:
        case GgufValueType::Int64:
            return true;
        default:
            return false;
    }
}

const GgmlTypeTraits* ggml_type_traits(std::uint32_t number) {
    for (const GgmlTypeTraits& t : kGgmlTypes) {
        if (static_cast<std::uint32_t>(t.type) == number) return &t;
    }
    return nullptr;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
    const GgmlTypeTraits* traits = ggml_type_traits(static_cast<std::uint32_t>(type));
    KASCADE_ASSERT(traits != nullptr);
    return *traits;
}

std::uint64_t GgufTensor::numel() const {
    std::uint64_t n = 1;
    for (const std::uint64_t d : dims) n *= d;  // bounded when the file was opened
    return n;
}

GgufFile::GgufFile(const std::filesystem::path& path) : file_(path) {
    const std::string name = path.string();
    Cursor in(name, file_.data(), file_.size());
    KASCADE_CHECK(file_.size() >= kMagic.size() && std::memcmp(file_.data(), kMagic.data(), kMagic.size()) == 0,
                  "{}: not a GGUF file (it does not start with the magic \"GGUF\")", name);
    in.read<std::uint32_t>("the magic");
    version_ = in.read<std::uint32_t>("the version");
    KASCADE_CHECK(__builtin_bswap32(version_) != 2 && __builtin_bswap32(version_) != 3,
                  "{}: a big-endian GGUF file (version field {:#010x} at byte 4); only little-endian files are "
                  "supported",
                  name, version_);
    KASCADE_CHECK(version_ == 2 || version_ == 3,
                  "{}: GGUF version {} at byte 4 is not supported (supported: 2 and 3; version 1 files predate "
                  "August 2023 and must be converted again)",
                  name, version_);
    const std::uint64_t tensor_count_at = in.offset();
    const auto tensor_count = in.read<std::uint64_t>("the tensor count");
    const std::uint64_t kv_count_at = in.offset();
    const auto kv_count = in.read<std::uint64_t>("the metadata count");
    // A key or a tensor info takes at least 13 or 24 bytes: larger counts cannot fit (and must not be reserved).
    KASCADE_CHECK(kv_count <= in.remaining() / 13,
                  "{}: truncated GGUF file: {} metadata entries declared at byte {} cannot fit in the {} bytes left",
                  name, kv_count, kv_count_at, in.remaining());
    for (std::uint64_t i = 0; i < kv_count; ++i) {
        const std::uint64_t at = in.offset();
        std::string key = in.read_string(fmt::format("the key of metadata entry {}", i));
        const GgufValueType type = read_value_type(in, key, "value type");
        GgufValue value = read_value(in, key, type, 0);
        KASCADE_CHECK(!metadata_.contains(key), "{}: metadata key \"{}\" at byte {} appears twice", name, key, at);
        metadata_.emplace(std::move(key), std::move(value));
    }
    if (const GgufValue* alignment = find("general.alignment")) {
        KASCADE_CHECK(alignment->type == GgufValueType::UInt32, "{}",
                      type_error(name, "general.alignment", *alignment, "uint32"));
        KASCADE_CHECK(alignment->integer > 0 && std::has_single_bit(static_cast<std::uint64_t>(alignment->integer)),
                      "{}: metadata key \"general.alignment\" at byte {} is {}, expected a power of two", name,
                      alignment->offset, alignment->integer);
        alignment_ = static_cast<std::uint64_t>(alignment->integer);
    } else {
        alignment_ = kDefaultAlignment;
    }

    KASCADE_CHECK(tensor_count <= in.remaining() / 24,
                  "{}: truncated GGUF file: {} tensor infos declared at byte {} cannot fit in the {} bytes left", name,
                  tensor_count, tensor_count_at, in.remaining());
    tensors_.reserve(tensor_count);
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
        GgufTensor t;
        t.info_offset = in.offset();
        t.name = in.read_string(fmt::format("the name of tensor {}", i));
        const std::string what = fmt::format("the tensor info of \"{}\"", t.name);
        const auto n_dims = in.read<std::uint32_t>(what);
        KASCADE_CHECK(n_dims >= 1 && n_dims <= kMaxDims,
                      "{}: tensor \"{}\" (tensor info at byte {}) has {} dimensions, expected 1 to {}", name, t.name,
                      t.info_offset, n_dims, kMaxDims);
        std::uint64_t numel = 1;
        for (std::uint32_t d = 0; d < n_dims; ++d) {
            const auto extent = in.read<std::uint64_t>(what);
            KASCADE_CHECK(extent <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) &&
                              !__builtin_mul_overflow(numel, extent, &numel) &&
                              numel <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                          "{}: tensor \"{}\" (tensor info at byte {}) has extents whose element count overflows", name,
                          t.name, t.info_offset);
            t.dims.push_back(extent);
        }
        const std::uint64_t type_at = in.offset();
        const auto type_number = in.read<std::uint32_t>(what);
        const GgmlTypeTraits* traits = ggml_type_traits(type_number);
        KASCADE_CHECK(traits != nullptr, "{}: tensor \"{}\" has unknown GGUF tensor type {} at byte {}", name, t.name,
                      type_number, type_at);
        t.type = traits->type;
        KASCADE_CHECK(t.dims[0] % traits->block_elements == 0,
                      "{}: tensor \"{}\" (tensor info at byte {}) has rows of {} elements, not a whole number of {} "
                      "blocks ({} elements each)",
                      name, t.name, t.info_offset, t.dims[0], traits->name, traits->block_elements);
        const std::uint64_t offset_at = in.offset();
        t.file_offset = in.read<std::uint64_t>(what);  // relative to the data region until fixed below
        KASCADE_CHECK(t.file_offset % alignment_ == 0,
                      "{}: tensor \"{}\" has data offset {} at byte {}, not a multiple of general.alignment = {}", name,
                      t.name, t.file_offset, offset_at, alignment_);
        t.nbytes = numel / traits->block_elements * traits->block_bytes;
        KASCADE_CHECK(!tensor_index_.contains(t.name), "{}: tensor \"{}\" at byte {} appears twice", name, t.name,
                      t.info_offset);
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }
    // The data region starts at the next multiple of the alignment.
    data_offset_ = (in.offset() + alignment_ - 1) / alignment_ * alignment_;
    for (GgufTensor& t : tensors_) {
        const std::uint64_t relative = t.file_offset;
        std::uint64_t end = 0;
        KASCADE_CHECK(!__builtin_add_overflow(data_offset_, relative, &t.file_offset) &&
                          !__builtin_add_overflow(t.file_offset, t.nbytes, &end) && end <= file_.size(),
                      "{}: tensor \"{}\" (tensor info at byte {}) has data offset {} past the end of the file: its "
                      "{} bytes of {} would end at byte {}, but the file has {} bytes (truncated?)",
                      name, t.name, t.info_offset, relative, t.nbytes, ggml_type_traits(t.type).name,
                      data_offset_ + relative + t.nbytes, file_.size());
        t.data = file_.data() + t.file_offset;
    }
}

const GgufValue* GgufFile::find(std::string_view key) const {
    const auto it = metadata_.find(key);
    return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::int64_t GgufFile::integer(std::string_view key, std::int64_t default_value) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return default_value;
    KASCADE_CHECK(v->is_integer(), "{}", type_error(path().string(), key, *v, "an integer"));
    KASCADE_CHECK(v->type != GgufValueType::UInt64 || v->integer >= 0,
                  "{}: metadata key \"{}\" at byte {} is {}, too large", path().string(), key, v->offset,
                  static_cast<std::uint64_t>(v->integer));
    return v->integer;
}

double GgufFile::real(std::string_view key, double default_value) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return default_value;
    if (v->is_integer()) return static_cast<double>(integer(key, 0));
    KASCADE_CHECK(v->is_float(), "{}", type_error(path().string(), key, *v, "a number"));
    return v->real;
}

bool GgufFile::boolean(std::string_view key, bool default_value) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return default_value;
    KASCADE_CHECK(v->type == GgufValueType::Bool, "{}", type_error(path().string(), key, *v, "bool"));
    return v->integer != 0;
}

std::string GgufFile::string(std::string_view key, std::string_view default_value) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::string(default_value);
    KASCADE_CHECK(v->type == GgufValueType::String, "{}", type_error(path().string(), key, *v, "string"));
    return v->text;
}

const GgufValue* GgufFile::array(std::string_view key, std::initializer_list<GgufValueType> element_types) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return nullptr;
    KASCADE_CHECK(v->type == GgufValueType::Array, "{}", type_error(path().string(), key, *v, "array"));
    std::string expected;
    for (const GgufValueType t : element_types) {
        if (t == v->element_type) return v;
        expected += (expected.empty() ? "" : " or ") + std::string(gguf_value_type_name(t));
    }
    KASCADE_FAIL("{}: metadata key \"{}\" at byte {} is an array of {}, expected an array of {}", path().string(), key,
                 v->offset, gguf_value_type_name(v->element_type), expected);
}

}  // namespace kascade
