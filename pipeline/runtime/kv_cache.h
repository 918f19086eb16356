// pipeline/runtime/kv_cache.h: the keys and values a model has seen, per layer, in the head-major layout the
// attention kernels read ([n_kv_heads][capacity][head_dim], see kernels/attention_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "io/weights/model_config.h"

namespace kascade {

class KvCache {
  public:
    KvCache(const ModelConfig& config, int capacity);

    int capacity() const { return capacity_; }
    int length() const { return length_; }  ///< positions stored so far
    void clear() { length_ = 0; }
    /// Forgets every position from `length` on (0 <= length <= length()): a decode step can be rerun from the same
    /// cache, as a benchmark does.
    void truncate(int length);

    float* keys(int layer) { return k_[layer].data(); }
    float* values(int layer) { return v_[layer].data(); }
    const float* keys(int layer) const { return k_[layer].data(); }
    const float* values(int layer) const { return v_[layer].data(); }

    /// Copies n token-major rows ([n][n_kv_heads][head_dim]) of keys and values into positions length()..+n of
    /// `layer`. The caller advances the length once every layer has been written (advance()).
    void write(int layer, const float* k_rows, const float* v_rows, int n);
    void advance(int n);

  private:
    int n_kv_heads_;
    int head_dim_;
    int capacity_;
    int length_ = 0;
    std::vector<std::vector<float>> k_, v_;
};

}  // namespace kascade
