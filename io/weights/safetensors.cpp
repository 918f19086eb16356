// io/weights/safetensors.cpp: parsing and validating safetensors headers and sharded index files.
#include "io/weights/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace kascade {
namespace {

using nlohmann::json;

constexpr std::size_t kLengthBytes = 8;
constexpr std::string_view kSupportedDtypes = "F32, F16, BF16";

bool parse_dtype(const std::string& name, DType* dtype) {
    for (DType d : {DType::F32, DType::F16, DType::BF16}) {
        if (name == dtype_name(d)) {
            *dtype = d;
            return true;
        }
    }
    return false;
}

// A JSON value as the user wrote it, shortened, for "found ..." in messages.
std::string json_excerpt(const json& value) {
    std::string text = value.dump();
    constexpr std::size_t kMax = 60;
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

// Parses one header entry; `data_size` is the size of the data region that follows the header.
SafetensorsTensor parse_entry(const std::string& file, const std::string& name, const json& entry,
                              const std::uint8_t* data_region, std::size_t data_size) {
    KASCADE_CHECK(entry.is_object(), "{}: header entry for tensor {} must be an object, found {}", file, name,
                  json_excerpt(entry));
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
        KASCADE_CHECK(entry.contains(key), "{}: header entry for tensor {} has no \"{}\"", file, name, key);
    }
    SafetensorsTensor tensor;
    const json& dtype = entry["dtype"];
    KASCADE_CHECK(dtype.is_string(), "{}: tensor {} has dtype {}, expected a string", file, name, json_excerpt(dtype));
    KASCADE_CHECK(parse_dtype(dtype.get<std::string>(), &tensor.dtype),
                  "{}: tensor {} has unsupported dtype {} (supported: {})", file, name, dtype.get<std::string>(),
                  kSupportedDtypes);

    const json& shape = entry["shape"];
    KASCADE_CHECK(shape.is_array(), "{}: tensor {} has shape {}, expected an array of integers", file, name,
                  json_excerpt(shape));
    std::uint64_t numel = 1;
    for (const json& d : shape) {
        KASCADE_CHECK(d.is_number_unsigned(), "{}: tensor {} has shape {}, expected non-negative integers", file, name,
                      json_excerpt(shape));
        const auto extent = d.get<std::uint64_t>();
        KASCADE_CHECK(extent <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) &&
                          !__builtin_mul_overflow(numel, extent, &numel),
                      "{}: tensor {} has shape {}, whose element count overflows", file, name, json_excerpt(shape));
        tensor.shape.push_back(static_cast<std::int64_t>(extent));
    }

    const json& offsets = entry["data_offsets"];
    KASCADE_CHECK(
        offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
        "{}: tensor {} has data_offsets {}, expected [begin, end] with non-negative integers", file, name,
        json_excerpt(offsets));
    const auto begin = offsets[0].get<std::uint64_t>();
    const auto end = offsets[1].get<std::uint64_t>();
    KASCADE_CHECK(begin <= end, "{}: tensor {} has data_offsets [{}, {}]: begin is after end", file, name, begin, end);
    KASCADE_CHECK(end <= data_size,
                  "{}: tensor {} has data_offsets [{}, {}], past the end of the data region ({} bytes; the file is "
                  "truncated or the header is corrupt)",
                  file, name, begin, end, data_size);
    std::uint64_t expected_bytes = 0;
    KASCADE_CHECK(
        !__builtin_mul_overflow(numel, dtype_size(tensor.dtype), &expected_bytes) && end - begin == expected_bytes,
        "{}: tensor {} has {} data bytes (data_offsets [{}, {}]) but shape {} x {} needs {}", file, name, end - begin,
        begin, end, shape_string(tensor.shape), dtype_name(tensor.dtype), expected_bytes);
    tensor.data = data_region + begin;
    tensor.nbytes = static_cast<std::size_t>(end - begin);
    return tensor;
}

}  // namespace

std::string shape_string(const std::vector<std::int64_t>& shape) {
    return fmt::format("[{}]", fmt::join(shape, ", "));
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path) {
    const std::string name = path.string();
    const std::size_t size = file_.size();
    KASCADE_CHECK(size >= kLengthBytes, "{}: file is {} bytes, too short for a safetensors file (at least {})", name,
                  size, kLengthBytes);
    std::uint64_t header_len = 0;
    std::memcpy(&header_len, file_.data(), kLengthBytes);
    KASCADE_CHECK(header_len <= size - kLengthBytes,
                  "{}: safetensors header length {} runs past the end of the file ({} bytes; truncated, or not a "
                  "safetensors file)",
                  name, header_len, size);
    const auto* header_begin = reinterpret_cast<const char*>(file_.data() + kLengthBytes);
    json header = json::parse(header_begin, header_begin + header_len, nullptr, /*allow_exceptions=*/false);
    KASCADE_CHECK(!header.is_discarded(), "{}: safetensors header ({} bytes) is not valid JSON", name, header_len);
    KASCADE_CHECK(header.is_object(), "{}: safetensors header must be a JSON object, found {}", name,
                  json_excerpt(header));

    const std::uint8_t* data_region = file_.data() + kLengthBytes + header_len;
    const std::size_t data_size = size - kLengthBytes - static_cast<std::size_t>(header_len);
    for (const auto& [tensor_name, entry] : header.items()) {
        if (tensor_name == "__metadata__") continue;  // free-form string map (e.g. {"format": "pt"})
        SafetensorsTensor tensor = parse_entry(name, tensor_name, entry, data_region, data_size);
        tensor.file = &file_.path();
        tensors_.emplace(tensor_name, std::move(tensor));
    }

    // No two tensors may share bytes: sort by start and compare neighbours (empty tensors occupy nothing).
    std::vector<std::pair<const std::string*, const SafetensorsTensor*>> by_offset;
    for (const auto& [tensor_name, tensor] : tensors_) {
        if (tensor.nbytes > 0) by_offset.emplace_back(&tensor_name, &tensor);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto& a, const auto& b) { return a.second->data < b.second->data; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const SafetensorsTensor& prev = *by_offset[i - 1].second;
        const SafetensorsTensor& cur = *by_offset[i].second;
        KASCADE_CHECK(prev.data + prev.nbytes <= cur.data,
                      "{}: tensors {} (data_offsets [{}, {}]) and {} (data_offsets [{}, {}]) overlap", name,
                      *by_offset[i - 1].first, prev.data - data_region, prev.data + prev.nbytes - data_region,
                      *by_offset[i].first, cur.data - data_region, cur.data + cur.nbytes - data_region);
    }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

SafetensorsSet::SafetensorsSet(const std::filesystem::path& path) : path_(path) {
    if (path.extension() != ".json") {
        files_.push_back(std::make_unique<SafetensorsFile>(path));
        for (const auto& [name, tensor] : files_.back()->tensors()) tensors_.emplace(name, &tensor);
        return;
    }
    const std::string index_name = path.string();
    json index = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
    KASCADE_CHECK(!index.is_discarded(), "{}: safetensors index is not valid JSON", index_name);
    KASCADE_CHECK(index.is_object() && index.contains("weight_map"), "{}: safetensors index has no \"weight_map\"",
                  index_name);
    const json& weight_map = index["weight_map"];
    KASCADE_CHECK(weight_map.is_object(), "{}: \"weight_map\" must be an object {{tensor name: shard file}}, found {}",
                  index_name, json_excerpt(weight_map));
    std::map<std::string, const SafetensorsFile*> shards;
    for (const auto& [tensor_name, shard] : weight_map.items()) {
        KASCADE_CHECK(shard.is_string(), "{}: weight_map entry for tensor {} must be a file name, found {}", index_name,
                      tensor_name, json_excerpt(shard));
        const auto shard_name = shard.get<std::string>();
        auto it = shards.find(shard_name);
        if (it == shards.end()) {
            const std::filesystem::path shard_path = path.parent_path() / shard_name;
            KASCADE_CHECK(std::filesystem::exists(shard_path),
                          "{}: weight_map puts tensor {} in {}, which does not exist", index_name, tensor_name,
                          shard_path.string());
            files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
            it = shards.emplace(shard_name, files_.back().get()).first;
        }
        const SafetensorsTensor* tensor = it->second->find(tensor_name);
        KASCADE_CHECK(tensor != nullptr, "{}: weight_map puts tensor {} in {}, which does not contain it", index_name,
                      tensor_name, it->second->path().string());
        tensors_.emplace(tensor_name, tensor);
    }
}

const SafetensorsTensor* SafetensorsSet::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
}

}  // namespace kascade
