// The HDF5 artifact fuzz target: opening an artifact as the stages do (format and version checks), its provenance
// header, then every group and dataset in it, read the way the stages read them (whole, and by rows).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/store/h5_file.h"

namespace kascade::fuzz {

namespace {

// Fuzzed files claim any extent; only datasets up to this many elements are read (a real artifact's are read by
// stages that first check the shape against the model).
constexpr std::int64_t kMaxElementsRead = 1 << 16;
// Deeper nesting than any artifact has (root / layer group / dataset) is not walked.
constexpr int kMaxDepth = 4;

void read_dataset(const H5Dataset& ds) {
    const std::vector<std::int64_t> shape = ds.shape();
    std::int64_t elements = 1;
    for (const std::int64_t d : shape) {
        require(d >= 0, fmt::format("{}: negative extent {}", ds.name(), d));
        if (d != 0 && elements > kMaxElementsRead / d) return;  // too big to read here (and maybe to count)
        elements *= d;
    }
    require(ds.size() == elements, fmt::format("{}: size() {} for {} elements", ds.name(), ds.size(), elements));
    const H5DType dtype = ds.dtype();
    const bool real = dtype == H5DType::Float32 || dtype == H5DType::Float64;
    if (real) {
        require(ds.read<double>().size() == static_cast<std::size_t>(elements), "read<double> size");
    } else {
        require(ds.read<std::int64_t>().size() == static_cast<std::size_t>(elements), "read<int64_t> size");
    }
    if (!shape.empty() && shape[0] > 0) {
        const std::size_t row = static_cast<std::size_t>(elements / shape[0]);
        if (real) {
            require(ds.read_rows<float>(shape[0] - 1, 1).size() == row, "read_rows<float> size");
        } else {
            require(ds.read_rows<std::int32_t>(shape[0] - 1, 1).size() == row, "read_rows<int32_t> size");
        }
    }
}

void walk(const H5Group& group, int depth) {
    if (depth > kMaxDepth) return;
    for (const std::string& child : group.children()) {
        try {
            if (group.has(child)) {
                try {
                    walk(group.open_group(child), depth + 1);
                } catch (const kascade::Error&) {
                    read_dataset(group.open_dataset(child));  // not a group: a dataset (or neither)
                }
            }
        } catch (const kascade::Error&) {
            // One broken object does not stop the walk over its siblings.
        }
    }
}

}  // namespace

bool fuzz_h5_artifact(FuzzInput input) {
    try {
        // Every version is accepted here so the fuzzer gets past the check to the header and the data.
        const H5ArtifactReader reader(write_input_file("artifact.h5", input), std::numeric_limits<std::int64_t>::min(),
                                      std::numeric_limits<std::int64_t>::max());
        try {
            static_cast<void>(read_artifact_header(reader.root()));
        } catch (const kascade::Error&) {
        }
        walk(reader.root(), 0);
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
