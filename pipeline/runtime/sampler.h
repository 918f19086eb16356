// pipeline/runtime/sampler.h: picking the next token from logits: greedy, or temperature + nucleus (top-p).
#pragma once

#include <cstdint>
#include <random>

namespace kascade {

struct SamplerOptions {
    float temperature = 0;  ///< 0: greedy (argmax, lowest id on ties)
    float top_p = 1;        ///< nucleus mass in (0, 1]; 1 samples from the full distribution
    uint64_t seed = 0;
};

class Sampler {
  public:
    explicit Sampler(const SamplerOptions& options);
    int32_t sample(const float* logits, int vocab_size);

  private:
    SamplerOptions options_;
    std::mt19937_64 rng_;
};

}  // namespace kascade
