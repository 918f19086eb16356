// io/weights/random_checkpoint.h: a randomly initialised Hugging Face checkpoint for any supported config.json, for
// mechanics and speed studies at the shape of a model whose weights one does not have (kascade random-model, the
// benchmarks). Perplexities of such a model mean nothing; its speed and memory are those of the real model.
#pragma once

#include <cstdint>
#include <filesystem>

#include "io/weights/dtype.h"

namespace kascade {

struct RandomCheckpointOptions {
    std::uint64_t seed = 1;
    int layers = 0;  ///< > 0: num_hidden_layers written to the copied config.json (and the tensors made for it)
    DType dtype = DType::BF16;
};

/// Writes `out_dir`/config.json (the given one, with num_hidden_layers replaced when options.layers > 0) and
/// `out_dir`/model.safetensors with every tensor the family needs (q/k/v biases for Qwen2, q/k norms for Qwen3, the
/// LM head when untied). Matrices are uniform in [-a, a] with a = sqrt(3) * initializer_range (0.02 by default), norm
/// weights 1 + U[-0.1, 0.1], biases U[-0.02, 0.02]. Values depend only on the seed and the tensor's name and index, not
/// on the thread count. Files are written atomically; errors name the file.
void write_random_checkpoint(const std::filesystem::path& config_json, const std::filesystem::path& out_dir,
                             const RandomCheckpointOptions& options);

}  // namespace kascade
