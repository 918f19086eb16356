// tests/weights/test_meta_checkpoint.cpp: Meta's original checkpoint folders (params.json + consolidated.NN.pth)
// against independent writers. make_meta_checkpoint.py (Debian's python3-torch) saves small random Llamas with
// torch.save in Meta's names and layout, one shard and two model-parallel shards, F32 / BF16 / F16, and the same
// weights as Hugging Face folders with Hugging Face's permutation of the q/k rows; the logits of a forward pass must
// agree within 1e-6. params.json is checked against the published sizes of real models; the zip and pickle readers
// against torch.save's own files (committed as fuzz seeds) and hand-built pickles; damaged folders must be refused
// naming file and field.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/temp_dir.h"
#include "io/file_util.h"
#include "io/weights/meta_checkpoint.h"
#include "io/weights/model_weights.h"
#include "io/weights/torch_checkpoint.h"
#include "io/weights/torch_pickle.h"
#include "io/weights/zip_archive.h"
#include "runtime/runtime_logits.h"
#include "weights_test_util.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_message;

// Fails the test unless `text` contains `part`, showing both.
#define EXPECT_CONTAINS(text, part)                                                                         \
    do {                                                                                                    \
        const std::string text_ = (text);                                                                   \
        EXPECT_NE(text_.find(part), std::string::npos) << "\"" << text_ << "\" lacks \"" << (part) << "\""; \
    } while (0)

// Debian's python3-torch installs into Debian's interpreter, which a python3 earlier on PATH may not see.
constexpr const char* kPython = "/usr/bin/python3";
const fs::path kScript = fs::path(KASCADE_SOURCE_DIR) / "tests" / "weights" / "make_meta_checkpoint.py";
constexpr double kMaxRelativeError = 1e-6;

std::string quote(const fs::path& path) {
    std::string quoted(1, '\'');
    quoted += path.string();
    quoted += '\'';
    return quoted;
}

// max |x - reference| / max |reference| over every logit.
double relative_error(const std::vector<float>& x, const std::vector<float>& reference) {
    EXPECT_EQ(x.size(), reference.size());
    double max_diff = 0, max_ref = 0;
    for (std::size_t i = 0; i < x.size() && i < reference.size(); ++i) {
        EXPECT_TRUE(std::isfinite(x[i])) << "logit " << i;
        max_diff = std::max(max_diff, std::abs(static_cast<double>(x[i]) - reference[i]));
        max_ref = std::max(max_ref, std::abs(static_cast<double>(reference[i])));
    }
    return max_diff / max_ref;
}

std::vector<int32_t> tokens_for(int vocab) {
    std::vector<int32_t> tokens;
    std::uint64_t state = 12345;
    for (int i = 0; i < 24; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        tokens.push_back(static_cast<int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab)));
    }
    return tokens;
}

std::vector<float> logits(const ModelWeights& w) {
    return test::runtime_logits(w, tokens_for(w.config.vocab_size), /*decode=*/false);
}

// The fixtures are written once for the whole suite (importing torch takes seconds).
class MetaCheckpointTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        const std::string probe = std::string(kPython) + " -c 'import torch' > /dev/null 2>&1";
        if (std::system(probe.c_str()) != 0) {
            missing_ = new std::string(std::string(kPython) + " cannot import torch (install Debian's python3-torch)");
            return;
        }
        fixtures_ = new test::TempDir("meta-checkpoint");
        const std::string command = std::string(kPython) + " " + quote(kScript) + " " + quote(fixtures_->path());
        if (std::system(command.c_str()) != 0) missing_ = new std::string(command + " failed");
    }
    static void TearDownTestSuite() {
        delete fixtures_;
        delete missing_;
        fixtures_ = nullptr;
        missing_ = nullptr;
    }
    void SetUp() override {
        if (missing_ == nullptr) return;
        const char* required = std::getenv("KASCADE_REQUIRE_NODE_REFERENCE");
        if (required != nullptr && std::string(required) == "1") FAIL() << *missing_;
        GTEST_SKIP() << "the torch.save fixtures are unavailable: " << *missing_;
    }

    static fs::path fixture(const std::string& name) { return fixtures_->path() / name; }

    /// A copy of fixture folder `name` that a test may damage.
    fs::path copy_of(const std::string& name) const {
        const fs::path copy = scratch_.path() / name;
        fs::copy(fixture(name), copy, fs::copy_options::recursive);
        return copy;
    }

    /// A copy of `name` with params.json changed by `edit`; the message load_model refuses it with.
    std::string refusal_with_params(const std::string& name, const std::function<void(json&)>& edit) const {
        const fs::path dir = scratch_.path() / ("edited-" + std::to_string(edits_++));
        fs::copy(fixture(name), dir, fs::copy_options::recursive);
        json params = json::parse(read_file(dir / "params.json"));
        edit(params);
        test::write_bytes(dir / "params.json", params.dump());
        return error_message([&] { load_model(dir); });
    }

    static test::TempDir* fixtures_;
    static std::string* missing_;
    test::TempDir scratch_{"meta-scratch"};
    mutable int edits_ = 0;
};

test::TempDir* MetaCheckpointTest::fixtures_ = nullptr;
std::string* MetaCheckpointTest::missing_ = nullptr;

// The fixtures are written once per test process (torch's import takes seconds), so the folders are checked in two
// tests: the ones that load, and the damaged ones.
TEST_F(MetaCheckpointTest, FoldersGiveTheLogitsOfTheirSafetensorsCopies) {
    {
        SCOPED_TRACE("One shard, Llama 2 style, F32, GQA 4/2");
        const ModelWeights meta = load_model(fixture("meta-a-1"));
        const ModelConfig& c = meta.config;
        EXPECT_EQ(meta.format, "meta");
        EXPECT_EQ(c.model_type, "llama");
        EXPECT_EQ(c.dim, 64);
        EXPECT_EQ(c.n_heads, 4);
        EXPECT_EQ(c.n_kv_heads, 2);  // GQA
        EXPECT_EQ(c.head_dim, 16);
        EXPECT_EQ(c.hidden_dim, 192);  // int(2 * 256 / 3) = 170, rounded up to a multiple of 32
        EXPECT_EQ(c.vocab_size, 96);   // vocab_size -1: from the embedding
        EXPECT_EQ(c.max_seq_len, 4096);
        EXPECT_EQ(c.bos_token_id, 1);
        EXPECT_EQ(c.eos_token_id, 2);
        EXPECT_EQ(c.rope_layout, RopeLayout::RotateHalf);  // wq / wk rows reordered as Hugging Face's converter does
        EXPECT_EQ(c.rope_scaling.type, RopeScalingType::None);
        EXPECT_FALSE(c.tie_word_embeddings);
        EXPECT_EQ(meta.embed.dtype, DType::F32);
        const ModelWeights hf = load_model(fixture("hf-a"));
        for (std::size_t l = 0; l < hf.layers.size(); ++l) {
            EXPECT_EQ(test::matrix_values(meta.layers[l].wq), test::matrix_values(hf.layers[l].wq)) << "layer " << l;
            EXPECT_EQ(test::matrix_values(meta.layers[l].wk), test::matrix_values(hf.layers[l].wk)) << "layer " << l;
        }
        EXPECT_LT(relative_error(logits(meta), logits(hf)), kMaxRelativeError);
    }
    {
        SCOPED_TRACE("Storages larger than the zip reader's probe are mapped in place too");
        ZipArchive archive(fixture("meta-a-1") / "consolidated.00.pth");
        const auto embedding = archive.entry("consolidated.00/data/0");  // the first storage saved: 96 x 64 F32
        EXPECT_EQ(embedding.size(), 96u * 64u * 4u);
        EXPECT_EQ(archive.entry("consolidated.00/data/0").data(), embedding.data());
    }
    {
        SCOPED_TRACE("Two shards");
        // Llama 2's split: the embedding by columns, wq/wk/wv/w1/w3/output by rows, wo/w2 by columns. The joined
        // matrices must equal the single shard's, which torch.save wrote unsplit.
        const ModelWeights one = load_model(fixture("meta-a-1"));
        const ModelWeights two = load_model(fixture("meta-a-2"));
        EXPECT_EQ(two.config.vocab_size, 96);
        EXPECT_EQ(test::matrix_values(two.embed), test::matrix_values(one.embed));
        EXPECT_EQ(test::matrix_values(two.lm_head), test::matrix_values(one.lm_head));
        for (std::size_t l = 0; l < one.layers.size(); ++l) {
            const LayerWeights& a = one.layers[l];
            const LayerWeights& b = two.layers[l];
            for (auto m : {&LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv, &LayerWeights::wo,
                           &LayerWeights::w_gate, &LayerWeights::w_up, &LayerWeights::w_down}) {
                EXPECT_EQ(test::matrix_values(b.*m), test::matrix_values(a.*m)) << "layer " << l;
            }
        }
        EXPECT_LT(relative_error(logits(two), logits(load_model(fixture("hf-a")))), kMaxRelativeError);
    }
    {
        SCOPED_TRACE("Llama 3.1 style");
        // Llama 3's split (the embedding by rows), BF16 storages, use_scaled_rope, ffn_dim_multiplier, GQA 8/2.
        const ModelWeights meta = load_model(fixture("meta-b-2"));
        const ModelConfig& c = meta.config;
        EXPECT_EQ(c.hidden_dim, 224);  // int(1.3 * int(2 * 256 / 3)) = 221, rounded up to a multiple of 16
        EXPECT_EQ(c.n_heads, 8);
        EXPECT_EQ(c.n_kv_heads, 2);
        EXPECT_EQ(c.vocab_size, 128);
        EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
        EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Llama3);
        EXPECT_EQ(c.rope_scaling.factor, 8.0);
        EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
        EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
        EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
        EXPECT_EQ(c.max_seq_len, 131072);
        EXPECT_EQ(meta.layers[0].wq.dtype, DType::BF16);  // kept in the file's dtype
        EXPECT_LT(relative_error(logits(meta), logits(load_model(fixture("hf-b")))), kMaxRelativeError);
        // The scaling matters at these positions: the copy read without it gives other logits.
        const fs::path unscaled = copy_of("hf-b");
        json config = json::parse(read_file(unscaled / "config.json"));
        config.erase("rope_scaling");
        test::write_bytes(unscaled / "config.json", config.dump());
        EXPECT_GT(relative_error(logits(meta), logits(load_model(unscaled))), 1e-4);

        // --weights-dtype f32 converts the joined matrices as it converts a safetensors file's.
        const LoadOptions f32{WeightsDType::F32};
        const ModelWeights meta_f32 = load_model(fixture("meta-b-2"), f32);
        EXPECT_EQ(meta_f32.layers[0].wq.dtype, DType::F32);
        EXPECT_EQ(meta_f32.embed.dtype, DType::F32);
        EXPECT_LT(relative_error(logits(meta_f32), logits(load_model(fixture("hf-b"), f32))), kMaxRelativeError);
    }
    {
        SCOPED_TRACE("F16, tied");
        const ModelWeights meta = load_model(fixture("meta-c-1"));
        EXPECT_TRUE(meta.config.tie_word_embeddings);
        EXPECT_EQ(meta.lm_head.data, meta.embed.data);
        EXPECT_EQ(meta.embed.dtype, DType::F16);
        EXPECT_FLOAT_EQ(meta.config.rms_norm_eps, 1e-6f);
        EXPECT_EQ(meta.config.n_kv_heads, meta.config.n_heads);  // no GQA here
        EXPECT_LT(relative_error(logits(meta), logits(load_model(fixture("hf-c")))), kMaxRelativeError);
    }
}

// The zip and pickle readers on files committed as fuzz seeds (tests/fuzz/corpus/zip_archive), whose content is
// known: state-dict.pth is torch.save (python3-torch 1.13) of nn.Linear(3, 2).state_dict() plus "fused.a" =
// arange(12)[:4].view(2, 2) and "fused.b" = arange(12)[4:10].view(2, 3) (views of one storage), "half" = ones(2, 2)
// F16 and "bf16" = full(3, 0.5) BF16; deflated.zip is Python's zipfile with a/text = "kascade " * 40 and a/empty
// deflated and a/stored = "0123456789" * 10 stored.
const fs::path kZipSeeds = fs::path(KASCADE_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "zip_archive";

template <typename T>
std::vector<T> values_of(const TorchTensor& t) {
    std::vector<T> v(t.numel);
    std::memcpy(v.data(), t.data, t.numel * sizeof(T));
    return v;
}

TEST(TorchCheckpointTest, StateDictWrittenByTorchSaveIsReadAsWritten) {
    ZipArchive archive(kZipSeeds / "state-dict.pth");
    EXPECT_EQ(archive.names().size(), 7u);  // data.pkl, data/0 ... data/4, version
    const auto records = read_torch_pickle(archive.entry("state-dict/data.pkl"), "state-dict.pth");
    ASSERT_EQ(records.size(), 6u);
    // Storages are keyed in the order torch.save first meets them: weight 0, bias 1, fused 2, half 3, bf16 4.
    const TorchTensorRecord& b = records.at("fused.b");
    EXPECT_EQ(b.dtype, DType::F32);
    EXPECT_EQ(b.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(b.strides, (std::vector<std::int64_t>{3, 1}));
    EXPECT_EQ(b.storage_key, "2");
    EXPECT_EQ(b.storage_offset, 4);
    EXPECT_EQ(b.storage_numel, 12);
    EXPECT_EQ(records.at("half").dtype, DType::F16);
    EXPECT_EQ(records.at("bf16").dtype, DType::BF16);
    // A stored entry is the mapping itself: the same bytes on every call, not a copy per call.
    EXPECT_EQ(archive.entry("state-dict/data/2").data(), archive.entry("state-dict/data/2").data());

    const TorchCheckpoint checkpoint(kZipSeeds / "state-dict.pth");
    ASSERT_NE(checkpoint.find("fused.b"), nullptr);
    EXPECT_EQ(values_of<float>(*checkpoint.find("fused.a")), (std::vector<float>{0, 1, 2, 3}));
    EXPECT_EQ(values_of<float>(*checkpoint.find("fused.b")), (std::vector<float>{4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(values_of<std::uint16_t>(*checkpoint.find("half")), (std::vector<std::uint16_t>(4, 0x3c00)));  // 1.0
    EXPECT_EQ(values_of<std::uint16_t>(*checkpoint.find("bf16")), (std::vector<std::uint16_t>(3, 0x3f00)));  // 0.5
    EXPECT_EQ(checkpoint.find("weight")->shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(checkpoint.find("absent"), nullptr);
}

TEST(TorchCheckpointTest, DeflatedEntriesAreInflatedAndDamageIsRefusedNamingArchiveAndEntry) {
    ZipArchive archive(kZipSeeds / "deflated.zip");
    const auto as_text = [](std::span<const std::uint8_t> bytes) {
        return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    };
    std::string text, digits;
    for (int i = 0; i < 40; ++i) text += "kascade ";
    for (int i = 0; i < 10; ++i) digits += "0123456789";
    EXPECT_EQ(as_text(archive.entry("a/text")), text);
    EXPECT_EQ(as_text(archive.entry("a/empty")), "");
    EXPECT_EQ(as_text(archive.entry("a/stored")), digits);
    EXPECT_CONTAINS(error_message([&] { archive.entry("absent"); }), "deflated.zip: entry absent is missing");

    test::TempDir dir("zip");
    std::string bytes = read_file(kZipSeeds / "deflated.zip");
    bytes[40] = static_cast<char>(bytes[40] ^ 0x55);  // in a/text's 14 compressed bytes (from 30 + "a/text")
    ZipArchive damaged(dir.write("damaged.zip", bytes));
    EXPECT_CONTAINS(error_message([&] { damaged.entry("a/text"); }), "damaged.zip: entry a/text: ");
    EXPECT_CONTAINS(error_message([&] { ZipArchive cut(dir.write("cut.zip", bytes.substr(0, 200))); }),
                    "cut.zip: not a readable zip archive");
}

TEST_F(MetaCheckpointTest, DamagedFoldersAreRefusedNamingFileAndField) {
    {
        SCOPED_TRACE("TruncatedArchiveIsRefused");
        const fs::path dir = copy_of("meta-a-1");
        const std::string bytes = read_file(dir / "consolidated.00.pth");
        test::write_bytes(dir / "consolidated.00.pth", bytes.substr(0, bytes.size() / 2));
        const std::string message = error_message([&] { load_model(dir); });
        EXPECT_CONTAINS(message, "consolidated.00.pth: not a readable zip archive");
        EXPECT_CONTAINS(message, "truncated");
    }
    {
        SCOPED_TRACE("PickleNamingAnotherGlobalIsRefusedWithoutRunningIt");
        const std::string message = error_message([&] { load_model(fixture("meta-evil")); });
        EXPECT_CONTAINS(message,
                        "consolidated.00.pth: consolidated.00/data.pkl: byte 2: global os.system is not "
                        "allowed");
    }
    {
        SCOPED_TRACE("ParamsDisagreeingWithTheTensorsAreRefusedNamingTheField");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["n_kv_heads"] = 4; }),
                        "consolidated.00.pth: tensor layers.0.attention.wk.weight has shape [32, 64], but ");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["n_kv_heads"] = 4; }),
                        "params.json (dim = 64, n_heads = 4, n_kv_heads = 4) implies [64, 64]");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["vocab_size"] = 100; }),
                        "tensor tok_embeddings.weight has shape [96, 64], but ");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["multiple_of"] = 128; }),
                        "tensor layers.0.feed_forward.w1.weight has shape [192, 64], but");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["multiple_of"] = 128; }),
                        "params.json (dim = 64 with multiple_of and ffn_dim_multiplier: FFN width 256)");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["n_layers"] = 3; }),
                        "tensor layers.2.attention.wq.weight is missing: ");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["n_layers"] = 1; }),
                        "tensor(s) are not used by the model");
        EXPECT_CONTAINS(refusal_with_params("meta-a-2", [](json& p) { p["n_kv_heads"] = 1; }),
                        "params.json (dim = 64, n_heads = 4, n_kv_heads = 1) implies [16, 64] split by rows over the 2 "
                        "shards, [8, 64] in each");
        // Halving dim makes Llama 2's column-split embedding look like Llama 3's row split; the norms then disagree.
        EXPECT_CONTAINS(refusal_with_params("meta-a-2", [](json& p) { p["dim"] = 32; }),
                        "consolidated.00.pth: tensor layers.0.attention_norm.weight has shape [64], but ");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["vision_chunk_size"] = 560; }),
                        "params.json: field \"vision_chunk_size\" is not supported");
        EXPECT_CONTAINS(refusal_with_params("meta-a-1", [](json& p) { p["n_heads"] = 3; }),
                        "params.json: field \"n_heads\" = 3 is not divisible by \"n_kv_heads\" = 2");
    }
    {
        SCOPED_TRACE("MissingShardIsRefused");
        const fs::path last = copy_of("meta-a-2");
        fs::remove(last / "consolidated.01.pth");
        EXPECT_CONTAINS(error_message([&] { load_model(last); }),
                        "it holds 1/2 of that and the folder has 1 shard(s): are shards missing?");
        const fs::path first = scratch_.path() / "first-missing";
        fs::copy(fixture("meta-a-2"), first, fs::copy_options::recursive);
        fs::remove(first / "consolidated.00.pth");
        EXPECT_CONTAINS(error_message([&] { load_model(first); }), "consolidated.00.pth is missing");
    }
    {
        SCOPED_TRACE("NonContiguousAndNonFiniteTensorsAreRefused");
        EXPECT_CONTAINS(error_message([&] { load_model(fixture("meta-noncontig")); }),
                        "tensor layers.0.attention.wo.weight has shape [64, 64] and strides [1, 64]: not contiguous");
        // Element [3, 5] of a [64, 192] matrix.
        EXPECT_CONTAINS(error_message([&] { load_model(fixture("meta-nan")); }),
                        "consolidated.00.pth: tensor layers.1.feed_forward.w2.weight holds a non-finite value (NaN or "
                        "infinity) at element 581");
    }
}

// params.json of published models against the sizes of their Hugging Face config.json (intermediate_size,
// max_position_embeddings): the values Meta's and Hugging Face's code derive.
TEST(MetaParamsTest, PublishedParamsGiveThePublishedSizes) {
    test::TempDir dir("meta-params");
    const auto parse = [&](const std::string& text) { return load_meta_params(dir.write("params.json", text)); };
    const ModelConfig llama32 = parse(
        R"({"dim": 2048, "ffn_dim_multiplier": 1.5, "multiple_of": 256, "n_heads": 32, "n_kv_heads": 8,
            "n_layers": 16, "norm_eps": 1e-05, "rope_theta": 500000.0, "use_scaled_rope": true, "vocab_size": 128256})");
    EXPECT_EQ(llama32.hidden_dim, 8192);
    EXPECT_EQ(llama32.head_dim, 64);
    EXPECT_EQ(llama32.vocab_size, 128256);
    EXPECT_EQ(llama32.max_seq_len, 131072);
    EXPECT_EQ(llama32.rope_scaling.type, RopeScalingType::Llama3);
    const ModelConfig llama3 = parse(
        R"({"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "vocab_size": 128256, "multiple_of": 1024,
            "ffn_dim_multiplier": 1.3, "norm_eps": 1e-05, "rope_theta": 500000.0})");
    EXPECT_EQ(llama3.hidden_dim, 14336);
    EXPECT_EQ(llama3.max_seq_len, 8192);
    EXPECT_EQ(llama3.rope_scaling.type, RopeScalingType::None);
    const ModelConfig llama2 = parse(
        R"({"dim": 4096, "multiple_of": 256, "n_heads": 32, "n_layers": 32, "norm_eps": 1e-05, "vocab_size": -1})");
    EXPECT_EQ(llama2.hidden_dim, 11008);
    EXPECT_EQ(llama2.n_kv_heads, 32);
    EXPECT_EQ(llama2.vocab_size, 0);  // taken from the weights
    EXPECT_EQ(llama2.max_seq_len, 4096);
    EXPECT_FLOAT_EQ(llama2.rope_theta, 10000.0f);
    const ModelConfig llama2_70b = parse(
        R"({"dim": 8192, "multiple_of": 4096, "ffn_dim_multiplier": 1.3, "n_heads": 64, "n_kv_heads": 8,
            "n_layers": 80, "norm_eps": 1e-05, "vocab_size": -1})");
    EXPECT_EQ(llama2_70b.hidden_dim, 28672);
    EXPECT_CONTAINS(error_message([&] { parse(R"({"dim": 64, "n_layers": 2})"); }),
                    "params.json: required field \"n_heads\" is missing");
    EXPECT_CONTAINS(error_message([&] { parse(R"({"dim": 64, "n_layers": 2, "n_heads": 4, "use_scaled_rope": 1})"); }),
                    "params.json: field \"use_scaled_rope\" must be true or false, found 1");
}

// Hand-built pickles: what is not a state dict of tensors is refused at the opcode that shows it.
TEST(TorchPickleTest, AnythingButAStateDictOfTensorsIsRefused) {
    // The bytes of a literal (which may hold NULs), without its terminating NUL.
    const auto refusal = []<std::size_t N>(const char(&literal)[N]) {
        const std::string pickle(literal, N - 1);
        return error_message([&] {
            read_torch_pickle({reinterpret_cast<const std::uint8_t*>(pickle.data()), pickle.size()}, "t.pkl");
        });
    };
    // {"x": 5}
    EXPECT_CONTAINS(refusal("\x80\x02}q\x00X\x01\x00\x00\x00xK\x05s."),
                    "t.pkl: entry x of the state dict is an integer, not a tensor");
    EXPECT_CONTAINS(refusal("\x80\x04\x95"), "t.pkl: byte 0: pickle protocol 4");
    EXPECT_CONTAINS(refusal("\x80\x02}S'a'\n."), "t.pkl: byte 3: opcode 0x53 ('S') is not");
    EXPECT_CONTAINS(refusal("\x80\x02}q"), "t.pkl: byte 3: the pickle ends inside an opcode");
    EXPECT_CONTAINS(refusal("\x80\x02s."), "t.pkl: byte 2: the stack is empty");
    // ("\x02" "c...": a hex escape would swallow the c)
    EXPECT_CONTAINS(refusal("\x80\x02"
                            "cbuiltins\neval\n"),
                    "t.pkl: byte 2: global builtins.eval is not allowed");
    EXPECT_CONTAINS(refusal("\x80\x02"
                            "ctorch\nDoubleStorage\n"),
                    "global torch.DoubleStorage is not allowed");
    EXPECT_CONTAINS(refusal("\x80\x02K\x01."), "the pickle holds an integer, not a state dict");
}

}  // namespace
}  // namespace kascade
