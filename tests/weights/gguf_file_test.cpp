// tests/weights/gguf_file_test.cpp: the GGUF container and its dequantization against files written by llama.cpp's
// converter and gguf-py (tests/fixtures/gguf, made by scripts/make_gguf_fixtures.sh): weights against the Hugging
// Face checkpoint they were converted from or against gguf-py's dequantization of them; handcrafted bad files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/weights/gguf_checkpoint.h"
#include "io/weights/gguf_dequant.h"
#include "io/weights/gguf_file.h"
#include "io/weights/safetensors.h"
#include "weights/weights_test_util.h"

namespace kascade {
namespace {

namespace fs = std::filesystem;
using test::error_message;

const fs::path kFixtures = fs::path(KASCADE_SOURCE_DIR) / "tests/fixtures/gguf";
const fs::path kShared = KASCADE_SHARED_DIR;

// ---- files written by gguf-py and llama.cpp's converter ------------------------------------------------------------

TEST(GgufFile, ReadsTheConvertersHeaderMetadataAndTensors) {
    const GgufFile f(kFixtures / "stories260K-f32.gguf");
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.data_offset() % 32, 0u);
    EXPECT_EQ(f.tensors().size(), 47u);  // 5 layers x 9 + token_embd + output_norm (tied: no output)
    EXPECT_EQ(f.string("general.architecture", ""), "llama");
    EXPECT_EQ(f.integer("llama.block_count", 0), 5);
    EXPECT_EQ(f.find("llama.block_count")->type, GgufValueType::UInt32);
    EXPECT_FLOAT_EQ(static_cast<float>(f.real("llama.attention.layer_norm_rms_epsilon", 0)), 1e-5f);
    const GgufValue* tokens = f.array("tokenizer.ggml.tokens", {GgufValueType::String});
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->elements.size(), 512u);
    EXPECT_EQ(tokens->elements[1].text, "<s>");
    EXPECT_EQ(tokens->elements[3].text, "<0x00>");
    const GgufTensor* embed = f.find_tensor("token_embd.weight");
    ASSERT_NE(embed, nullptr);
    EXPECT_EQ(embed->dims, (std::vector<std::uint64_t>{64, 512}));  // ggml order: [cols, rows]
    EXPECT_EQ(embed->type, GgmlType::F32);
    EXPECT_EQ(embed->nbytes, 64u * 512 * 4);
    // A key of another type is refused naming it.
    EXPECT_NE(
        error_message([&] { f.string("llama.block_count", ""); }).find("metadata key \"llama.block_count\" at byte"),
        std::string::npos);
}

TEST(GgufFile, ConfigEqualsTheHuggingFaceConfigItWasConvertedFrom) {
    const GgufFile f(kFixtures / "stories260K-q8_0.gguf");
    const ModelConfig g = gguf_model_config(f);
    const ModelConfig h = load_hf_config(kShared / "models/stories260K-hf/config.json");
    EXPECT_EQ(g.dim, h.dim);
    EXPECT_EQ(g.hidden_dim, h.hidden_dim);
    EXPECT_EQ(g.n_layers, h.n_layers);
    EXPECT_EQ(g.n_heads, h.n_heads);
    EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
    EXPECT_EQ(g.head_dim, h.head_dim);
    EXPECT_EQ(g.vocab_size, h.vocab_size);
    EXPECT_EQ(g.max_seq_len, h.max_seq_len);
    EXPECT_EQ(g.rope_theta, h.rope_theta);
    EXPECT_EQ(g.rms_norm_eps, h.rms_norm_eps);
    EXPECT_EQ(g.tie_word_embeddings, h.tie_word_embeddings);
    EXPECT_EQ(g.bos_token_id, h.bos_token_id);
    EXPECT_EQ(g.eos_token_id, h.eos_token_id);
    EXPECT_EQ(g.rope_layout, h.rope_layout);
}

// gguf-py's dequantize() of random blocks of every type (scales finite) against gguf_dequantize, bit for bit.
TEST(GgufDequant, EveryTypeEqualsGgufPyBitForBit) {
    const GgufFile f(kFixtures / "dequant-types.gguf");
    const SafetensorsFile reference(kFixtures / "dequant-types-reference.safetensors");
    ASSERT_EQ(f.tensors().size(), 8u);
    for (const GgufTensor& t : f.tensors()) {
        SCOPED_TRACE(t.name);
        ASSERT_TRUE(gguf_can_dequantize(t.type));
        const SafetensorsTensor* r = reference.find(t.name);
        ASSERT_NE(r, nullptr);
        ASSERT_EQ(r->dtype, DType::F32);
        ASSERT_EQ(r->numel(), t.numel());
        std::vector<float> values(t.numel());
        gguf_dequantize(t.type, t.data, values.data(), values.size());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            float expected;
            std::memcpy(&expected, r->data + 4 * i, 4);
            if (std::memcmp(&expected, &values[i], 4) != 0 && ++mismatches <= 3) {
                ADD_FAILURE() << "element " << i << ": " << values[i] << " vs gguf-py " << expected;
            }
        }
        EXPECT_EQ(mismatches, 0u);
    }
    EXPECT_FALSE(gguf_can_dequantize(GgmlType::Q4_1));
    EXPECT_FALSE(gguf_can_dequantize(GgmlType::IQ2_XS));
}

void expect_same_matrix(const WeightMatrix& a, const WeightMatrix& b, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(a.dtype, b.dtype);
    ASSERT_EQ(a.rows, b.rows);
    ASSERT_EQ(a.cols, b.cols);
    const std::size_t bytes = static_cast<std::size_t>(a.rows) * a.cols * dtype_size(a.dtype);
    EXPECT_EQ(std::memcmp(a.data, b.data, bytes), 0);
}

void expect_same_vector(const float* a, const float* b, int n, const std::string& what) {
    EXPECT_EQ(std::memcmp(a, b, static_cast<std::size_t>(n) * 4), 0) << what;
}

// Every weight of `a` equals that of `b` bit for bit, in the same dtype.
void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
    ASSERT_EQ(a.layers.size(), b.layers.size());
    const int dim = a.config.dim;
    expect_same_matrix(a.embed, b.embed, "embedding");
    expect_same_matrix(a.lm_head, b.lm_head, "lm_head");
    expect_same_vector(a.final_norm, b.final_norm, dim, "final norm");
    for (std::size_t i = 0; i < a.layers.size(); ++i) {
        const LayerWeights& x = a.layers[i];
        const LayerWeights& y = b.layers[i];
        const std::string layer = "layer " + std::to_string(i) + " ";
        expect_same_vector(x.attn_norm, y.attn_norm, dim, layer + "attn_norm");
        expect_same_vector(x.mlp_norm, y.mlp_norm, dim, layer + "mlp_norm");
        expect_same_matrix(x.wq, y.wq, layer + "wq");
        expect_same_matrix(x.wk, y.wk, layer + "wk");
        expect_same_matrix(x.wv, y.wv, layer + "wv");
        expect_same_matrix(x.wo, y.wo, layer + "wo");
        expect_same_matrix(x.w_gate, y.w_gate, layer + "w_gate");
        expect_same_matrix(x.w_up, y.w_up, layer + "w_up");
        expect_same_matrix(x.w_down, y.w_down, layer + "w_down");
    }
}

TEST(GgufCheckpoint, F32WeightsEqualTheHuggingFaceCheckpointTheyCameFrom) {
    // The converter reordered the q/k rows for llama.cpp's RoPE; the loader must have put them back.
    const ModelWeights g = load_model(kFixtures / "stories260K-f32.gguf");
    const ModelWeights h = load_model(kShared / "models/stories260K-hf");
    EXPECT_EQ(g.format, "gguf");
    EXPECT_EQ(g.embed.dtype, DType::F32);
    EXPECT_EQ(g.embed.data, g.lm_head.data);  // tied
    expect_same_weights(g, h);
}

TEST(GgufCheckpoint, Bf16WeightsEqualTheCheckpointRoundedToBf16) {
    // convert_hf_to_gguf --outtype bf16 rounds to nearest even, as kascade's --weights-dtype bf16 does.
    const ModelWeights g = load_model(kFixtures / "stories260K-bf16.gguf");
    EXPECT_EQ(g.layers[0].wq.dtype, DType::BF16);
    const ModelWeights h = load_model(kShared / "models/stories260K-hf", {.weights_dtype = WeightsDType::BF16});
    expect_same_weights(g, h);
}

TEST(GgufCheckpoint, QuantizedWeightsEqualGgufPysDequantizationRoundedToBf16) {
    for (const char* name : {"stories260K-q8_0", "random-bpe-q4_k_m"}) {
        SCOPED_TRACE(name);
        const ModelWeights g = load_model(kFixtures / (std::string(name) + ".gguf"));
        const ModelWeights r = load_model(kFixtures / (std::string(name) + "-reference"));
        EXPECT_EQ(g.layers[0].wq.dtype, DType::BF16);
        expect_same_weights(g, r);
    }
    // stories260K's 172-wide down projection is no whole number of Q8_0 blocks: the converter kept it F16.
    const ModelWeights g = load_model(kFixtures / "stories260K-q8_0.gguf");
    EXPECT_EQ(g.layers[0].w_down.dtype, DType::F16);
}

TEST(GgufCheckpoint, WeightsDtypeF32DequantizesToFp32) {
    const ModelWeights g = load_model(kFixtures / "random-bpe-q4_k_m.gguf", {.weights_dtype = WeightsDType::F32});
    const ModelWeights b = load_model(kFixtures / "random-bpe-q4_k_m.gguf");
    ASSERT_EQ(g.layers[1].wv.dtype, DType::F32);
    // Rounded to BF16, the fp32 values are the default load's.
    const std::vector<float> f32 = test::matrix_values(g.layers[1].wv);
    const std::vector<float> bf16 = test::matrix_values(b.layers[1].wv);
    ASSERT_EQ(f32.size(), bf16.size());
    for (std::size_t i = 0; i < f32.size(); ++i) ASSERT_EQ(float_from_bf16(bf16_from_float(f32[i])), bf16[i]) << i;
}

// ---- handcrafted files ---------------------------------------------------------------------------------------------

// A GGUF file built field by field, remembering where each field starts.
class GgufBuilder {
  public:
    explicit GgufBuilder(std::uint32_t version = 3, std::string_view magic = "GGUF") {
        bytes_.append(magic);
        u32(version);
        counts_at_ = bytes_.size();
        u64(0);
        u64(0);
    }
    void u32(std::uint32_t v) { append(&v, 4); }
    void u64(std::uint64_t v) { append(&v, 8); }
    void str(std::string_view s) {
        u64(s.size());
        bytes_.append(s);
    }
    std::size_t size() const { return bytes_.size(); }

    void kv_string(std::string_view key, std::string_view value) {
        str(key);
        u32(8);
        str(value);
        ++kvs_;
    }
    void kv_u32(std::string_view key, std::uint32_t value) {
        str(key);
        u32(4);
        u32(value);
        ++kvs_;
    }
    /// A tensor info; returns the byte offset of its type field.
    std::size_t tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t type,
                       std::uint64_t offset) {
        str(name);
        u32(static_cast<std::uint32_t>(dims.size()));
        for (const std::uint64_t d : dims) u64(d);
        const std::size_t type_at = bytes_.size();
        u32(type);
        u64(offset);
        ++tensors_;
        return type_at;
    }
    /// Pads to 32 bytes and appends `data_bytes` bytes of data.
    std::string finish(std::size_t data_bytes) {
        std::memcpy(bytes_.data() + counts_at_, &tensors_, 8);
        std::memcpy(bytes_.data() + counts_at_ + 8, &kvs_, 8);
        bytes_.resize((bytes_.size() + 31) / 32 * 32, '\0');
        bytes_.append(data_bytes, '\0');
        return bytes_;
    }

  private:
    void append(const void* p, std::size_t n) { bytes_.append(static_cast<const char*>(p), n); }
    std::string bytes_;
    std::size_t counts_at_ = 0;
    std::uint64_t tensors_ = 0;
    std::uint64_t kvs_ = 0;
};

class GgufBadFile : public testing::Test {
  protected:
    // The message opening `bytes` as a GGUF file gives; it must name the file.
    std::string message(const std::string& bytes) {
        const fs::path path = dir_.path() / "bad.gguf";
        test::write_bytes(path, bytes);
        const std::string m = error_message([&] { GgufFile f(path); });
        EXPECT_NE(m.find(path.string()), std::string::npos) << m;
        return m;
    }
    test::TempDir dir_{"gguf-bad"};
};

TEST_F(GgufBadFile, WrongMagic) {
    GgufBuilder b(3, "GGML");
    EXPECT_NE(message(b.finish(0)).find("not a GGUF file"), std::string::npos);
}

TEST_F(GgufBadFile, UnsupportedVersions) {
    EXPECT_NE(message(GgufBuilder(1).finish(0)).find("GGUF version 1 at byte 4 is not supported"), std::string::npos);
    EXPECT_NE(message(GgufBuilder(0x03000000).finish(0)).find("big-endian"), std::string::npos);
}

TEST_F(GgufBadFile, TensorOffsetPastTheEnd) {
    GgufBuilder b;
    b.tensor("blk.0.attn_q.weight", {4, 2}, 0, 1024);
    const std::string m = message(b.finish(32));
    EXPECT_NE(m.find("tensor \"blk.0.attn_q.weight\""), std::string::npos) << m;
    EXPECT_NE(m.find("has data offset 1024 past the end of the file"), std::string::npos) << m;
}

TEST_F(GgufBadFile, UnknownTensorType) {
    GgufBuilder b;
    const std::size_t type_at = b.tensor("token_embd.weight", {4}, 99, 0);
    const std::string m = message(b.finish(16));
    EXPECT_NE(m.find("tensor \"token_embd.weight\" has unknown GGUF tensor type 99 at byte " + std::to_string(type_at)),
              std::string::npos)
        << m;
}

TEST_F(GgufBadFile, MisalignedTensorOffset) {
    GgufBuilder b;
    b.tensor("t", {4}, 0, 4);
    EXPECT_NE(message(b.finish(64)).find("not a multiple of general.alignment = 32"), std::string::npos);
}

TEST_F(GgufBadFile, RowsThatAreNoWholeNumberOfBlocks) {
    GgufBuilder b;
    b.tensor("t", {48, 2}, static_cast<std::uint32_t>(GgmlType::Q8_0), 0);
    EXPECT_NE(message(b.finish(256)).find("rows of 48 elements, not a whole number of Q8_0 blocks"), std::string::npos);
}

TEST_F(GgufBadFile, UnknownValueTypeAndBadAlignmentKey) {
    GgufBuilder b;
    b.str("general.name");
    const std::size_t type_at = b.size();
    b.u32(13);
    std::string bytes = b.finish(0);
    bytes[16] = 1;  // one metadata entry
    EXPECT_NE(message(bytes).find("metadata key \"general.name\" has unknown GGUF value type 13 at byte " +
                                  std::to_string(type_at)),
              std::string::npos);
    GgufBuilder a;
    a.kv_u32("general.alignment", 24);
    EXPECT_NE(message(a.finish(0)).find("\"general.alignment\" at byte 53 is 24, expected a power of two"),
              std::string::npos);
}

TEST_F(GgufBadFile, TruncatedFiles) {
    const std::string whole = test::read_bytes(kFixtures / "stories260K-q8_0.gguf");
    // Cut inside the metadata: a string longer than what is left.
    std::string m = message(whole.substr(0, 200));
    EXPECT_NE(m.find("truncated GGUF file"), std::string::npos) << m;
    EXPECT_NE(m.find("at byte"), std::string::npos) << m;
    // Cut inside the data: the tensor whose data runs past the end is named.
    m = message(whole.substr(0, whole.size() - 100));
    EXPECT_NE(m.find("past the end of the file"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor \""), std::string::npos) << m;
    // Cut inside the magic.
    EXPECT_NE(message(whole.substr(0, 3)).find("not a GGUF file"), std::string::npos);
}

TEST_F(GgufBadFile, ModelsOfOtherArchitecturesAreRefused) {
    GgufBuilder b;
    b.kv_string("general.architecture", "gemma2");
    const fs::path path = dir_.path() / "gemma2.gguf";
    test::write_bytes(path, b.finish(0));
    const std::string m = error_message([&] { load_model(path); });
    EXPECT_NE(m.find("\"general.architecture\" = \"gemma2\" is not supported (supported: llama)"), std::string::npos)
        << m;
}

TEST_F(GgufBadFile, MissingHyperParameterIsNamed) {
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    b.kv_u32("llama.context_length", 128);
    const fs::path path = dir_.path() / "partial.gguf";
    test::write_bytes(path, b.finish(0));
    const std::string m = error_message([&] { load_model(path); });
    EXPECT_NE(m.find("required metadata key \"llama.embedding_length\" is missing"), std::string::npos) << m;
}

// A block count the file's tensors cannot hold (a fuzzed header asked for 2^31 - 1 blocks, and the loader ran out of
// memory sizing them) is refused with the key, the value and the tensor count.
TEST_F(GgufBadFile, MoreBlocksThanTheFileHasTensorsFor) {
    GgufBuilder b;
    b.kv_string("general.architecture", "llama");
    b.kv_u32("llama.context_length", 128);
    b.kv_u32("llama.embedding_length", 64);
    b.kv_u32("llama.block_count", 2147483647);
    b.tensor("token_embd.weight", {64, 8}, 0, 0);
    const fs::path path = dir_.path() / "blocks.gguf";
    test::write_bytes(path, b.finish(64 * 8 * 4));
    const std::string m = error_message([&] { load_model(path); });
    EXPECT_NE(m.find("llama.block_count = 2147483647 blocks, but the file holds 1 tensors"), std::string::npos) << m;
    EXPECT_NE(m.find(path.string()), std::string::npos) << m;
}

}  // namespace
}  // namespace kascade
