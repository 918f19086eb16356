// pipeline/runtime/kv_cache.h: the keys and values a model has seen, per layer, in the head-major layout the
// attention kernels read ([n_kv_heads][capacity][head_dim], see kernels/attention_types.h), as fp32 or as BF16
// (--kv-dtype: rounded to nearest even when written), and optionally the Quest page bounds of the keys
// (kernels/quest.h), kept up to date as positions are written or truncated.
#pragma once

#include <cstdint>
#include <vector>

#include "base/cache_aligned.h"
#include "io/weights/model_config.h"
#include "kernels/quest.h"

namespace kascade {

class KvCache {
  public:
    /// page_size > 0: also keep per (layer, KV head, page of page_size positions) the element-wise min and max key
    /// vectors (AttentionPolicy::kv_page_size() says what a policy needs).
    KvCache(const ModelConfig& config, int capacity, int page_size = 0, KvDType dtype = KvDType::F32);

    int capacity() const { return capacity_; }
    int length() const { return length_; }  ///< positions stored so far
    void clear() { length_ = 0; }
    /// Forgets every position from `length` on (0 <= length <= length()): a decode step can be rerun from the same
    /// cache, as a benchmark does.
    void truncate(int length);

    KvDType dtype() const { return dtype_; }
    KvPtr keys(int layer) const;
    KvPtr values(int layer) const;

    int page_size() const { return page_size_; }
    /// The page bounds of `layer` (page == 0 when the cache keeps none). Pages holding positions < length() are
    /// exact; write() updates the pages it touches before advance().
    KeyPageBounds page_bounds(int layer) const;

    /// Copies n token-major rows ([n][n_kv_heads][head_dim]) of keys and values into positions length()..+n of
    /// `layer`. The caller advances the length once every layer has been written (advance()).
    void write(int layer, const float* k_rows, const float* v_rows, int n);
    void advance(int n);

  private:
    int n_layers_;
    int n_kv_heads_;
    int head_dim_;
    int capacity_;
    int length_ = 0;
    KvDType dtype_;
    /// [layer][n_kv_heads][capacity][head_dim]: the pair of dtype_ is filled, the other is empty. Every row starts on a
    /// cache line where head_dim times the element size is a multiple of 64 bytes (the Llama, Qwen and Mistral shapes).
    std::vector<CacheAlignedVector<float>> k_f32_, v_f32_;
    std::vector<CacheAlignedVector<uint16_t>> k_bf16_, v_bf16_;
    int page_size_ = 0;
    int page_stride_ = 0;                                  ///< pages of room per KV head
    std::vector<std::vector<float>> page_min_, page_max_;  ///< [layer][n_kv_heads][page_stride][head_dim]

    /// Brings the page bounds of `layer` up to date with the keys of positions begin .. end-1 (a page starting at
    /// one of them is started afresh, an earlier one is widened).
    void update_pages(int layer, int begin, int end);
    /// Stores n elements of k_src and v_src at element offset `at` of `layer`, converted to dtype_.
    void store(int layer, size_t at, const float* k_src, const float* v_src, int n);
};

}  // namespace kascade
