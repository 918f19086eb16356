// tests/store/h5_file_test.cpp: HDF5 artifacts on real files: round trips of every element type and attribute kind,
// atomic writes, and refusal of truncated, foreign and future-version files.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/file_util.h"
#include "io/store/h5_file.h"
#include "store/store_test_util.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::TempDir;

template <class T>
std::vector<T> iota_values(std::size_t n, T start) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
    return v;
}

ArtifactHeader sample_header() {
    return ArtifactHeader{
        "capture", "cap-1",  "{\"model\":\"m0del\"}", "{\"ctx\":256,\"tile\":16}", "m0del", "t3xt", "tok",
        "0.1.0",   "abc123", "2026-01-01T00:00:00Z"};
}

// Writes a file with one dataset of every element type, nested groups and every attribute kind.
fs::path write_sample(const fs::path& dir) {
    const fs::path path = dir / "artifacts" / "capture" / "cap-1.h5";
    H5ArtifactWriter w(path, 1);
    write_artifact_header(w.root(), sample_header());
    w.root().set_attr("n_windows", 2);
    w.root().set_attr("topk_pct", 12.5);
    const std::vector<float> f32 = {0.5f, -1.25f, std::numeric_limits<float>::quiet_NaN(), 3e-8f, 7, 8};
    w.root().write_dataset<float>("f32", f32, {2, 3});
    w.root().write_dataset<double>("f64", iota_values<double>(24, 0.25), {2, 3, 4}, {.compress = true});
    w.root().write_dataset<std::int8_t>("i8", std::vector<std::int8_t>{-128, 0, 127}, {3});
    w.root().write_dataset<std::int32_t>("i32", iota_values<std::int32_t>(6, -3), {3, 2});
    w.root().write_dataset<std::int64_t>("i64", std::vector<std::int64_t>{std::int64_t{1} << 40, -5}, {2});
    w.root().write_dataset<std::uint8_t>("u8", std::vector<std::uint8_t>{0, 255}, {2});
    w.root().write_dataset<std::int32_t>("scalar", std::vector<std::int32_t>{42}, {});
    H5Group layer = w.root().create_group("layer_00");
    layer.set_attr("importance", 0.125);
    H5Dataset mass = layer.create_dataset("tile_mass", H5DType::Float32, {4, 2, 3}, {.compress = true});
    mass.set_attr("units", "probability mass");
    mass.set_attr_array<std::int32_t>("heads", std::vector<std::int32_t>{0, 1});
    mass.write_rows<float>(0, iota_values<float>(12, 0.0f));   // rows 0-1
    mass.write_rows<float>(3, iota_values<float>(6, 100.0f));  // row 3; row 2 stays 0
    w.commit();
    return path;
}

TEST(H5File, RoundTripOfEveryTypeAndAttribute) {
    TempDir tmp;
    const fs::path path = write_sample(tmp.path());
    ASSERT_TRUE(fs::is_regular_file(path));

    H5ArtifactReader r(path, 1, 1, "capture");
    EXPECT_EQ(r.format_version(), 1);
    const ArtifactHeader h = read_artifact_header(r.root());
    EXPECT_EQ(h.key, "cap-1");
    EXPECT_EQ(h.params_json, "{\"ctx\":256,\"tile\":16}");
    EXPECT_EQ(h.created_at, "2026-01-01T00:00:00Z");
    EXPECT_EQ(r.root().attr_string("format"), "kascade-artifact");
    EXPECT_EQ(r.root().attr_int("n_windows"), 2);
    EXPECT_DOUBLE_EQ(r.root().attr_double("topk_pct"), 12.5);
    EXPECT_DOUBLE_EQ(r.root().attr_double("n_windows"), 2.0);
    EXPECT_EQ(r.root().children(),
              (std::vector<std::string>{"f32", "f64", "i32", "i64", "i8", "layer_00", "scalar", "u8"}));

    const H5Dataset f32 = r.root().open_dataset("f32");
    EXPECT_EQ(f32.dtype(), H5DType::Float32);
    EXPECT_EQ(f32.shape(), (std::vector<std::int64_t>{2, 3}));
    const std::vector<float> f = f32.read<float>();
    ASSERT_EQ(f.size(), 6u);
    EXPECT_EQ(f[0], 0.5f);
    EXPECT_EQ(f[1], -1.25f);
    EXPECT_TRUE(std::isnan(f[2]));
    EXPECT_EQ(f[3], 3e-8f);
    EXPECT_EQ(f32.read_rows<float>(1, 1), (std::vector<float>{3e-8f, 7, 8}));

    const H5Dataset f64 = r.root().open_dataset("f64");
    EXPECT_EQ(f64.dtype(), H5DType::Float64);
    EXPECT_EQ(f64.read<double>(), iota_values<double>(24, 0.25));
    EXPECT_EQ(r.root().open_dataset("i8").read<std::int8_t>(), (std::vector<std::int8_t>{-128, 0, 127}));
    EXPECT_EQ(r.root().open_dataset("i8").read<std::int32_t>(), (std::vector<std::int32_t>{-128, 0, 127}));
    EXPECT_EQ(r.root().open_dataset("i8").dtype(), H5DType::Int8);
    EXPECT_EQ(r.root().open_dataset("i32").read<std::int32_t>(), iota_values<std::int32_t>(6, -3));
    EXPECT_EQ(r.root().open_dataset("i32").dtype(), H5DType::Int32);
    EXPECT_EQ(r.root().open_dataset("i64").read<std::int64_t>(),
              (std::vector<std::int64_t>{std::int64_t{1} << 40, -5}));
    EXPECT_EQ(r.root().open_dataset("i64").dtype(), H5DType::Int64);
    EXPECT_EQ(r.root().open_dataset("u8").read<std::uint8_t>(), (std::vector<std::uint8_t>{0, 255}));
    EXPECT_EQ(r.root().open_dataset("u8").dtype(), H5DType::UInt8);
    const H5Dataset scalar = r.root().open_dataset("scalar");
    EXPECT_TRUE(scalar.shape().empty());
    EXPECT_EQ(scalar.read<std::int64_t>(), (std::vector<std::int64_t>{42}));

    const H5Group layer = r.root().open_group("layer_00");
    EXPECT_EQ(layer.name(), "/layer_00");
    EXPECT_DOUBLE_EQ(layer.attr_double("importance"), 0.125);
    const H5Dataset mass = layer.open_dataset("tile_mass");
    EXPECT_EQ(mass.name(), "/layer_00/tile_mass");
    EXPECT_EQ(mass.attr_string("units"), "probability mass");
    EXPECT_EQ(mass.attr_array<std::int32_t>("heads"), (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(mass.attr_array<std::int64_t>("heads"), (std::vector<std::int64_t>{0, 1}));
    std::vector<float> expected = iota_values<float>(12, 0.0f);
    expected.resize(18, 0.0f);
    for (float v : iota_values<float>(6, 100.0f)) expected.push_back(v);
    EXPECT_EQ(mass.read<float>(), expected);
    EXPECT_EQ(mass.read_rows<float>(3, 1), iota_values<float>(6, 100.0f));
}

TEST(H5File, MisuseNamesTheObject) {
    TempDir tmp;
    const fs::path path = write_sample(tmp.path());
    H5ArtifactReader r(path, 1, 1);
    const std::string p = path.string();
    EXPECT_EQ(error_of([&] { r.root().open_dataset("nope"); }), p + ": dataset /nope is missing");
    EXPECT_EQ(error_of([&] { r.root().open_group("layer_00").open_dataset("q"); }),
              p + ": dataset /layer_00/q is missing");
    EXPECT_EQ(error_of([&] { r.root().attr_int("nope"); }), p + ": /: attribute nope is missing");
    EXPECT_EQ(error_of([&] { r.root().attr_int("topk_pct"); }), p + ": /: attribute topk_pct is real, expected int64");
    EXPECT_EQ(error_of([&] { r.root().attr_string("n_windows"); }), p + ": /: attribute n_windows is not a string");
    EXPECT_EQ(error_of([&] { r.root().open_dataset("f32").read<std::int32_t>(); }),
              p + ": /f32: dataset is real, expected int32");
    EXPECT_EQ(error_of([&] { r.root().open_dataset("f32").read_rows<float>(1, 2); }),
              p + ": /f32: rows [1, 3) out of range [0, 2)");
}

TEST(H5File, WriterWithoutCommitLeavesNothing) {
    TempDir tmp;
    const fs::path path = tmp.path() / "s.h5";
    fs::path partial;
    {
        H5ArtifactWriter w(path, 1);
        partial = w.partial_path();
        char host[256] = {0};
        ::gethostname(host, sizeof host - 1);
        EXPECT_EQ(partial.string(), path.string() + ".partial-" + host + "-" + std::to_string(::getpid()));
        w.root().write_dataset<float>("x", std::vector<float>{1, 2}, {2});
        EXPECT_TRUE(fs::exists(partial));
        EXPECT_FALSE(fs::exists(path));
    }
    EXPECT_FALSE(fs::exists(partial));
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(H5File, WriterErrorLeavesNothing) {
    TempDir tmp;
    const fs::path path = tmp.path() / "s.h5";
    EXPECT_THROW(
        {
            H5ArtifactWriter w(path, 1);
            w.root().write_dataset<float>("x", std::vector<float>{1, 2, 3}, {2});  // wrong size: throws
            w.commit();
        },
        Error);
    EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(H5File, TruncatedFileIsRefused) {
    TempDir tmp;
    const fs::path path = write_sample(tmp.path());
    fs::resize_file(path, fs::file_size(path) / 2);
    const std::string message = error_of([&] { H5ArtifactReader r(path, 1, 1); });
    EXPECT_EQ(message.rfind(fmt::format("cannot open HDF5 file \"{}\": ", path.string()), 0), 0u) << message;
    EXPECT_NE(message.find("truncated file"), std::string::npos) << message;
}

TEST(H5File, DamagedFileIsRefusedByItsChecksumBeforeHdf5OpensIt) {
    TempDir tmp;
    const fs::path path = write_sample(tmp.path());
    ArtifactRecord record;
    record.key = "cap-1";
    record.stage = "capture";
    record.path = "artifacts/capture/cap-1.h5";
    record.checksum = hash_file_hex(path);
    { H5ArtifactReader intact(tmp.path(), record, 1, 1); }
    // One byte in the middle changed: same size, root attributes intact.
    const auto middle = static_cast<std::streamoff>(fs::file_size(path) / 2);
    {
        std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
        io.seekg(middle);
        const char c = static_cast<char>(io.get());
        io.seekp(middle);
        io.put(static_cast<char>(c ^ 0x5a));
    }
    const std::string found = hash_file_hex(path);
    EXPECT_EQ(error_of([&] { H5ArtifactReader damaged(tmp.path(), record, 1, 1); }),
              fmt::format("{}: damaged or replaced: its checksum is {}, {} when it was stored; delete it and run its "
                          "stage again",
                          path.string(), found, *record.checksum));
    // A row stored before checksums has none: the file is opened, its attributes checked.
    record.checksum.reset();
    EXPECT_NO_THROW({ H5ArtifactReader unchecked(tmp.path(), record, 1, 1); });
}

TEST(H5File, NonHdf5FileIsRefused) {
    TempDir tmp;
    const fs::path path = tmp.path() / "junk.h5";
    std::ofstream(path) << std::string(4096, 'x');
    const std::string message = error_of([&] { H5ArtifactReader r(path, 1, 1); });
    EXPECT_EQ(message.rfind(fmt::format("cannot open HDF5 file \"{}\": ", path.string()), 0), 0u) << message;
    EXPECT_EQ(
        error_of([&] { H5ArtifactReader r(tmp.path() / "missing.h5", 1, 1); }),
        fmt::format("cannot open HDF5 file \"{}\": No such file or directory", (tmp.path() / "missing.h5").string()));
}

TEST(H5File, WrongFormatVersionOrStageIsRefused) {
    TempDir tmp;
    const fs::path path = tmp.path() / "capture.h5";
    {
        H5ArtifactWriter w(path, 3);
        write_artifact_header(w.root(), sample_header());
        w.commit();
    }
    EXPECT_EQ(error_of([&] { H5ArtifactReader r(path, 1, 2); }),
              path.string() + ": attribute format_version is 3, this kascade reads 1..2");
    EXPECT_EQ(error_of([&] { H5ArtifactReader r(path, 1, 1); }),
              path.string() + ": attribute format_version is 3, this kascade reads 1");
    EXPECT_EQ(error_of([&] { H5ArtifactReader r(path, 3, 3, "similarity"); }),
              path.string() + ": attribute stage is 'capture', expected 'similarity'");
    H5ArtifactReader ok(path, 1, 3, "capture");
    EXPECT_EQ(ok.format_version(), 3);
}

TEST(H5File, WrongFormatAttributeIsRefused) {
    TempDir tmp;
    const fs::path path = tmp.path() / "other.h5";
    {
        H5ArtifactWriter w(path, 1);
        w.root().set_attr("format", "something-else");
        w.commit();
    }
    EXPECT_EQ(error_of([&] { H5ArtifactReader r(path, 1, 1); }),
              path.string() + ": attribute format is 'something-else', expected 'kascade-artifact'");
}

TEST(H5File, H5dumpReadsTheFile) {
    if (!fs::exists("/usr/bin/h5dump")) GTEST_SKIP() << "h5dump is not installed";
    TempDir tmp;
    const fs::path path = write_sample(tmp.path());
    const fs::path out = tmp.path() / "dump.txt";
    const std::string cmd = fmt::format("/usr/bin/h5dump -H '{}' > '{}' 2>&1", path.string(), out.string());
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::ifstream in(out);
    const std::string dump((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(dump.find("ATTRIBUTE \"format\""), std::string::npos) << dump;
    EXPECT_NE(dump.find("DATASET \"tile_mass\""), std::string::npos) << dump;
}

}  // namespace
}  // namespace kascade
