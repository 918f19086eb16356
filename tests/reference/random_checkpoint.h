// tests/reference/random_checkpoint.h: a randomly initialised Hugging Face checkpoint for any Llama-family config.json,
// written as BF16 safetensors by the test's own writer, together with the same model as a naive::Model.
//
// The naive model is derived from config.json here, independently of the runtime's config parser and RoPE code:
// this file re-implements, from Hugging Face's definitions, which tensors a family has (q/k/v biases, q/k norms,
// untied head), the rope_scaling frequencies (linear, llama3, yarn) and the per-layer sliding windows. Part of the
// library kascade_test_reference (random_checkpoint.cpp), as naive_llama.h.
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "reference/naive_llama.h"

namespace naive {

/// Fast deterministic uniform numbers (splitmix64): the big shapes need hundreds of millions of values.
class UniformSource {
  public:
    explicit UniformSource(uint64_t seed) : state_(seed) {}
    /// Uniform in [-1, 1).
    float next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
    }

  private:
    uint64_t state_;
};

/// Writes config.json (as given) and a random BF16 model.safetensors into `dir`; returns the naive twin.
/// Weights are U[-w, w) with w = sqrt(3) * initializer_range (0.02 when absent); norms 1 + U[-0.1, 0.1).
Model write_random_checkpoint(const nlohmann::json& config, const std::filesystem::path& dir, uint64_t seed);

}  // namespace naive
