#include "pipeline/runtime/kv_cache.h"

#include <algorithm>

#include "base/error.h"

namespace kascade {

KvCache::KvCache(const ModelConfig& config, int capacity)
    : n_kv_heads_(config.n_kv_heads), head_dim_(config.head_dim), capacity_(capacity) {
    const size_t per_layer = static_cast<size_t>(n_kv_heads_) * capacity_ * head_dim_;
    k_.assign(config.n_layers, std::vector<float>(per_layer));
    v_.assign(config.n_layers, std::vector<float>(per_layer));
}

void KvCache::write(int layer, const float* k_rows, const float* v_rows, int n) {
    KASCADE_ASSERT(length_ + n <= capacity_);
    for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_kv_heads_; ++h) {
            const size_t src = (static_cast<size_t>(t) * n_kv_heads_ + h) * head_dim_;
            const size_t dst = (static_cast<size_t>(h) * capacity_ + length_ + t) * head_dim_;
            std::copy_n(k_rows + src, head_dim_, k_[layer].data() + dst);
            std::copy_n(v_rows + src, head_dim_, v_[layer].data() + dst);
        }
    }
}

void KvCache::truncate(int length) {
    KASCADE_ASSERT(length >= 0 && length <= length_);
    length_ = length;
}

void KvCache::advance(int n) {
    KASCADE_ASSERT(length_ + n <= capacity_);
    length_ += n;
}

}  // namespace kascade
