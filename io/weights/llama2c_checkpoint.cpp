// io/weights/llama2c_checkpoint.cpp: reading llama2.c legacy checkpoints.
#include "io/weights/llama2c_checkpoint.h"

#include <cstdint>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "io/file_util.h"
#include "io/weights/weight_storage.h"

namespace kascade {
namespace {

constexpr std::size_t kHeaderInts = 7;
constexpr std::size_t kHeaderBytes = kHeaderInts * sizeof(std::int32_t);
// The versioned llama2.c exports (export.py --version 1/2) start with this magic ("ak42"), not with dim.
constexpr std::int32_t kVersionedExportMagic = 0x616b3432;

// Element counts of the sections in file order. Computed in 64 bits with overflow checks, since a corrupt header can
// hold any int32 values.
std::uint64_t checked_mul(const std::filesystem::path& path, std::uint64_t a, std::uint64_t b) {
    std::uint64_t r = 0;
    KASCADE_CHECK(!__builtin_mul_overflow(a, b, &r), "{}: llama2.c header values imply a file larger than 2^64 bytes",
                  path.string());
    return r;
}

}  // namespace

ModelWeights load_llama2c_checkpoint(const std::filesystem::path& path, const LoadOptions& options) {
    auto file = std::make_shared<MappedFile>(path);
    const std::string name = path.string();
    KASCADE_CHECK(file->size() >= kHeaderBytes,
                  "{}: file is {} bytes, too short for a llama2.c checkpoint header ({} bytes)", name, file->size(),
                  kHeaderBytes);
    std::int32_t header[kHeaderInts];
    std::memcpy(header, file->data(), kHeaderBytes);
    KASCADE_CHECK(header[0] != kVersionedExportMagic,
                  "{}: this is a versioned llama2.c export (magic \"ak42\", version {}); only the legacy format "
                  "(export.py --version 0) is supported",
                  name, header[1]);
    KASCADE_CHECK(std::memcmp(file->data(), "PK\x03\x04", 4) != 0,
                  "{}: this is a zip archive (a PyTorch checkpoint?), not a llama2.c checkpoint; convert it to "
                  "safetensors",
                  name);

    const char* field_names[kHeaderInts] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                            "n_kv_heads", "vocab_size", "seq_len"};
    for (std::size_t i = 0; i < kHeaderInts; ++i) {
        if (i == 5) {
            KASCADE_CHECK(header[i] != 0 && header[i] != INT32_MIN,
                          "{}: llama2.c header field vocab_size = {} is invalid (must be non-zero)", name, header[i]);
        } else {
            KASCADE_CHECK(header[i] > 0, "{}: llama2.c header field {} = {} must be positive", name, field_names[i],
                          header[i]);
        }
    }
    ModelConfig config;
    config.model_type = "llama2c";
    config.dim = header[0];
    config.hidden_dim = header[1];
    config.n_layers = header[2];
    config.n_heads = header[3];
    config.n_kv_heads = header[4];
    config.tie_word_embeddings = header[5] > 0;
    config.vocab_size = header[5] > 0 ? header[5] : -header[5];
    config.max_seq_len = header[6];
    config.rope_theta = 10000.0f;
    config.rms_norm_eps = 1e-5f;
    config.attention_bias = false;
    config.bos_token_id = 1;
    config.eos_token_id = 2;
    config.rope_layout = RopeLayout::Interleaved;
    KASCADE_CHECK(config.dim % config.n_heads == 0, "{}: llama2.c header dim = {} is not divisible by n_heads = {}",
                  name, config.dim, config.n_heads);
    KASCADE_CHECK(config.n_heads % config.n_kv_heads == 0,
                  "{}: llama2.c header n_heads = {} is not divisible by n_kv_heads = {}", name, config.n_heads,
                  config.n_kv_heads);
    config.head_dim = config.dim / config.n_heads;
    KASCADE_CHECK(config.head_dim % 2 == 0,
                  "{}: llama2.c header implies head size dim / n_heads = {}, which must be even", name,
                  config.head_dim);

    const std::uint64_t dim = static_cast<std::uint64_t>(config.dim);
    const std::uint64_t hidden = static_cast<std::uint64_t>(config.hidden_dim);
    const std::uint64_t layers = static_cast<std::uint64_t>(config.n_layers);
    const std::uint64_t vocab = static_cast<std::uint64_t>(config.vocab_size);
    const std::uint64_t q_rows = static_cast<std::uint64_t>(config.n_heads) * config.head_dim;
    const std::uint64_t kv_rows = static_cast<std::uint64_t>(config.n_kv_heads) * config.head_dim;
    const std::uint64_t freq = static_cast<std::uint64_t>(config.max_seq_len) * (config.head_dim / 2);

    // Sizes in elements, in file order; the checks make every later product safe.
    const std::uint64_t embed_n = checked_mul(path, vocab, dim);
    const std::uint64_t q_n = checked_mul(path, checked_mul(path, layers, q_rows), dim);
    const std::uint64_t kv_n = checked_mul(path, checked_mul(path, layers, kv_rows), dim);
    const std::uint64_t ffn_n = checked_mul(path, checked_mul(path, layers, hidden), dim);
    const std::uint64_t sections[] = {
        embed_n,                                   // token_embedding_table
        layers * dim,                              // rms_att_weight
        q_n,                                       // wq
        kv_n,                                      // wk
        kv_n,                                      // wv
        q_n,                                       // wo
        layers * dim,                              // rms_ffn_weight
        ffn_n,                                     // w1
        ffn_n,                                     // w2
        ffn_n,                                     // w3
        dim,                                       // rms_final_weight
        freq,                                      // freq_cis_real
        freq,                                      // freq_cis_imag
        config.tie_word_embeddings ? 0 : embed_n,  // wcls
    };
    std::uint64_t floats = 0;
    for (std::uint64_t n : sections) {
        KASCADE_CHECK(!__builtin_add_overflow(floats, n, &floats),
                      "{}: llama2.c header values imply a file larger than 2^64 bytes", name);
    }
    const std::uint64_t expected_size = kHeaderBytes + checked_mul(path, floats, sizeof(float));
    KASCADE_CHECK(file->size() == expected_size,
                  "{}: file is {} bytes but its llama2.c header (dim {}, hidden_dim {}, n_layers {}, n_heads {}, "
                  "n_kv_heads {}, vocab_size {}, seq_len {}) implies {} bytes ({})",
                  name, file->size(), header[0], header[1], header[2], header[3], header[4], header[5], header[6],
                  expected_size, file->size() < expected_size ? "truncated" : "trailing bytes");

    // The data starts 28 bytes into a page-aligned mapping, so every float is 4-byte aligned and used in place.
    auto storage = std::make_shared<WeightStorage>();
    storage->sources.push_back(file);
    WeightPlacement placement(*storage, options.weights_dtype);
    const std::uint8_t* p = file->data() + kHeaderBytes;
    auto skip = [&p](std::uint64_t n) {
        const std::uint8_t* start = p;
        p += n * sizeof(float);
        return start;
    };
    // Each section is checked for NaN and infinity (as the safetensors loader checks each tensor), named as
    // llama2.c's export names it.
    auto take = [&](const char* section, std::uint64_t n) {
        const std::uint8_t* data = skip(n);
        const std::size_t bad = first_non_finite(DType::F32, data, n);
        KASCADE_CHECK(bad == n, "{}: section {} holds a non-finite value (NaN or infinity) at element {}", name,
                      section, bad);
        return data;
    };
    auto vector = [&](const char* section, std::uint64_t n) {
        return placement.vector(DType::F32, take(section, n), n);
    };
    auto matrix = [&](const char* section, std::uint64_t rows, std::uint64_t cols) {
        return placement.matrix(DType::F32, take(section, rows * cols), static_cast<int>(rows), static_cast<int>(cols));
    };
    ModelWeights w;
    w.config = config;
    w.source = path;
    w.format = "llama2c";
    w.weights_dtype = options.weights_dtype;
    w.layers.resize(config.n_layers);
    w.embed = matrix("token_embedding_table", vocab, dim);
    for (auto& layer : w.layers) layer.attn_norm = vector("rms_att_weight", dim);
    for (auto& layer : w.layers) layer.wq = matrix("wq", q_rows, dim);
    for (auto& layer : w.layers) layer.wk = matrix("wk", kv_rows, dim);
    for (auto& layer : w.layers) layer.wv = matrix("wv", kv_rows, dim);
    for (auto& layer : w.layers) layer.wo = matrix("wo", dim, q_rows);
    for (auto& layer : w.layers) layer.mlp_norm = vector("rms_ffn_weight", dim);
    for (auto& layer : w.layers) layer.w_gate = matrix("w1", hidden, dim);
    for (auto& layer : w.layers) layer.w_down = matrix("w2", dim, hidden);
    for (auto& layer : w.layers) layer.w_up = matrix("w3", hidden, dim);
    w.final_norm = vector("rms_final_weight", dim);
    skip(2 * freq);
    w.lm_head = config.tie_word_embeddings ? w.embed : matrix("wcls", vocab, dim);
    placement.finish();
    w.storage = storage;
    return w;
}

}  // namespace kascade
