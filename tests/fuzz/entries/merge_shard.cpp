// The merge fuzz target: a shard folder as `kascade merge` reads it, its kascade.db being the input, beside two
// artifact files with fixed contents (the seeds' rows name them, with their checksums). The merge must refuse or
// succeed, never crash; refused, it has created no destination database; done, every artifact row it wrote has its
// file, whose bytes hash to the row's checksum.
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "io/file_util.h"
#include "io/store/results_merge.h"

namespace kascade::fuzz {

namespace {

namespace fs = std::filesystem;

/// The artifact files of the shard: what the seed databases' rows point at (tests/fuzz/corpus/merge_shard/).
constexpr const char* kCaptureFile = "artifacts/capture/cap-1.h5";
constexpr const char* kCaptureBytes = "capture bytes";
constexpr const char* kSimilarityFile = "artifacts/similarity/sim-1.h5";
constexpr const char* kSimilarityBytes = "similarity bytes";

void write_file(const fs::path& path, const std::string& bytes) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

bool fuzz_merge_shard(FuzzInput input) {
    const fs::path shard = scratch_dir() / "shard", into = scratch_dir() / "into";
    std::error_code ignored;
    fs::remove_all(into, ignored);
    for (const char* suffix : {"-wal", "-shm", "-journal"})
        fs::remove(shard / (std::string("kascade.db") + suffix), ignored);
    write_file(shard / kCaptureFile, kCaptureBytes);
    write_file(shard / kSimilarityFile, kSimilarityBytes);
    write_input_file("shard/kascade.db", input);
    bool merged = false;
    try {
        merged = merge_shards({shard}, into).problems.empty();
    } catch (const kascade::Error&) {
        merged = false;
    }
    if (!merged) {
        require(!fs::exists(into / "kascade.db"), "a refused or failed merge left a destination database");
        return false;
    }
    // Read with the same store, read-only: every row arrived with its verified file.
    ResultsDb dest(into, DbAccess::ReadOnly);
    for (const ArtifactRecord& a : dest.list_artifacts()) {
        require(a.checksum.has_value(), fmt::format("artifact {} merged without a checksum", a.key));
        require(fs::is_regular_file(into / a.path), fmt::format("artifact {} merged without its file", a.key));
        require(hash_file_hex(into / a.path) == *a.checksum,
                fmt::format("artifact {} merged with a file that does not match its checksum", a.key));
    }
    return true;
}

}  // namespace kascade::fuzz
