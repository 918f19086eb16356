// io/weights/gguf_file.h: the GGUF container of llama.cpp (versions 2 and 3), read-only and memory-mapped.
//
// A file is: magic "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata (key string, u32 value
// type, value), the tensor infos (name string, u32 dimension count, u64 extents innermost first, u32 ggml type, u64
// offset), padding to general.alignment (default 32), then the data region the offsets are relative to. Strings are
// a u64 length and that many bytes; arrays a u32 element type, a u64 count and the elements. Everything is
// little-endian. Every read is bounds-checked; errors name the file, the key or tensor and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/file_util.h"

namespace kascade {

/// The value types of GGUF metadata, numbered as in the file.
enum class GgufValueType : std::uint32_t {
    UInt8 = 0,
    Int8 = 1,
    UInt16 = 2,
    Int16 = 3,
    UInt32 = 4,
    Int32 = 5,
    Float32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    UInt64 = 10,
    Int64 = 11,
    Float64 = 12,
};

/// "uint32", "string", "array", ...: as messages print a value type.
std::string_view gguf_value_type_name(GgufValueType type);

/// One metadata value. Integers of every width are held in `integer` (bool as 0/1), floats in `real`; an array holds
/// its elements, all of `element_type`.
struct GgufValue {
    GgufValueType type = GgufValueType::UInt8;
    std::uint64_t offset = 0;  ///< byte offset of the value in the file (for messages)
    std::int64_t integer = 0;  ///< integer types and bool (a uint64 above INT64_MAX is refused when read)
    double real = 0;           ///< float32 and float64
    std::string text;          ///< string
    GgufValueType element_type = GgufValueType::UInt8;  ///< array
    std::vector<GgufValue> elements;                    ///< array

    bool is_integer() const;
    bool is_float() const { return type == GgufValueType::Float32 || type == GgufValueType::Float64; }
};

/// ggml's tensor element types, numbered as in the file (ggml.h's enum ggml_type).
enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
};

/// How a ggml type is laid out: blocks of `block_elements` elements stored in `block_bytes` bytes each.
struct GgmlTypeTraits {
    GgmlType type;
    std::string_view name;  ///< "F32", "Q4_K", ...
    std::size_t block_elements;
    std::size_t block_bytes;
};

/// The traits of the type numbered `number` in a file, or null if ggml has no such type.
const GgmlTypeTraits* ggml_type_traits(std::uint32_t number);
/// The traits of a known type.
const GgmlTypeTraits& ggml_type_traits(GgmlType type);

/// One tensor of a mapped GGUF file. `dims` are ggml's extents, innermost first: a row-major [rows][cols] matrix
/// has dims {cols, rows}.
struct GgufTensor {
    std::string name;
    std::vector<std::uint64_t> dims;
    GgmlType type = GgmlType::F32;
    std::uint64_t info_offset = 0;       ///< byte offset of its tensor info in the file (for messages)
    std::uint64_t file_offset = 0;       ///< byte offset of its data in the file
    const std::uint8_t* data = nullptr;  ///< nbytes bytes inside the mapping
    std::size_t nbytes = 0;

    std::uint64_t numel() const;
};

/// A memory-mapped, fully validated GGUF file: opening it reads the header, every metadata value and tensor info,
/// and checks that each tensor's type is known, its row length a whole number of blocks, its offset aligned and its
/// data inside the file. Nothing is copied but the metadata.
class GgufFile {
  public:
    explicit GgufFile(const std::filesystem::path& path);
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::filesystem::path& path() const { return file_.path(); }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::uint64_t data_offset() const { return data_offset_; }

    /// The metadata value under `key`, or null.
    const GgufValue* find(std::string_view key) const;
    const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }

    /// The tensor called `name`, or null.
    const GgufTensor* find_tensor(std::string_view name) const;
    /// Every tensor, in file order.
    const std::vector<GgufTensor>& tensors() const { return tensors_; }

    // Typed metadata access: absent keys give the default; a present key of another type is an error naming the
    // file, the key, its offset and the type found.
    std::int64_t integer(std::string_view key, std::int64_t default_value) const;
    double real(std::string_view key, double default_value) const;  ///< a float or an integer value
    bool boolean(std::string_view key, bool default_value) const;
    std::string string(std::string_view key, std::string_view default_value) const;
    /// The array under `key` whose elements are of one of `element_types`, or null if absent.
    const GgufValue* array(std::string_view key, std::initializer_list<GgufValueType> element_types) const;

  private:
    MappedFile file_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
    std::uint64_t data_offset_ = 0;
    std::map<std::string, GgufValue, std::less<>> metadata_;
    std::vector<GgufTensor> tensors_;
    std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace kascade
