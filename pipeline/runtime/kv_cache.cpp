#include "pipeline/runtime/kv_cache.h"

#include <algorithm>

#include "base/bf16.h"
#include "base/error.h"

namespace kascade {

KvCache::KvCache(const ModelConfig& config, int capacity, int page_size, KvDType dtype)
    : n_layers_(config.n_layers),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      capacity_(capacity),
      dtype_(dtype),
      page_size_(page_size) {
    KASCADE_ASSERT(page_size >= 0);
    const size_t per_layer = static_cast<size_t>(n_kv_heads_) * capacity_ * head_dim_;
    if (dtype_ == KvDType::F32) {
        k_f32_.assign(config.n_layers, CacheAlignedVector<float>(per_layer));
        v_f32_.assign(config.n_layers, CacheAlignedVector<float>(per_layer));
    } else {
        k_bf16_.assign(config.n_layers, CacheAlignedVector<uint16_t>(per_layer));
        v_bf16_.assign(config.n_layers, CacheAlignedVector<uint16_t>(per_layer));
    }
    if (page_size_ > 0) {
        page_stride_ = (capacity_ + page_size_ - 1) / page_size_;
        const size_t per_layer_pages = static_cast<size_t>(n_kv_heads_) * page_stride_ * head_dim_;
        page_min_.assign(config.n_layers, std::vector<float>(per_layer_pages));
        page_max_.assign(config.n_layers, std::vector<float>(per_layer_pages));
    }
}

KvPtr KvCache::keys(int layer) const {
    return dtype_ == KvDType::F32 ? KvPtr(k_f32_[layer].data()) : KvPtr::bf16(k_bf16_[layer].data());
}

KvPtr KvCache::values(int layer) const {
    return dtype_ == KvDType::F32 ? KvPtr(v_f32_[layer].data()) : KvPtr::bf16(v_bf16_[layer].data());
}

void KvCache::store(int layer, size_t at, const float* k_src, const float* v_src, int n) {
    if (dtype_ == KvDType::F32) {
        std::copy_n(k_src, n, k_f32_[layer].data() + at);
        std::copy_n(v_src, n, v_f32_[layer].data() + at);
        return;
    }
    uint16_t* k_dst = k_bf16_[layer].data() + at;
    uint16_t* v_dst = v_bf16_[layer].data() + at;
    for (int i = 0; i < n; ++i) {
        k_dst[i] = bf16_from_float(k_src[i]);
        v_dst[i] = bf16_from_float(v_src[i]);
    }
}

KeyPageBounds KvCache::page_bounds(int layer) const {
    if (page_size_ == 0) return {};
    return {page_size_, page_stride_, page_min_[layer].data(), page_max_[layer].data()};
}

void KvCache::update_pages(int layer, int begin, int end) {
    // Positions begin .. end-1 are new: the first page they touch is widened (or started, when begin opens it), every
    // later page is started afresh.
    for (int h = 0; h < n_kv_heads_; ++h) {
        const KvPtr keys = this->keys(layer) + static_cast<int64_t>(h) * capacity_ * head_dim_;
        for (int pos = begin; pos < end;) {
            const int page = pos / page_size_;
            const int stop = std::min(end, (page + 1) * page_size_);
            const size_t at = (static_cast<size_t>(h) * page_stride_ + page) * head_dim_;
            key_page_bounds_add(keys + static_cast<int64_t>(pos) * head_dim_, stop - pos, head_dim_,
                                pos == page * page_size_, page_min_[layer].data() + at, page_max_[layer].data() + at);
            pos = stop;
        }
    }
}

void KvCache::write(int layer, const float* k_rows, const float* v_rows, int n) {
    KASCADE_ASSERT(length_ + n <= capacity_);
    for (int t = 0; t < n; ++t) {
        for (int h = 0; h < n_kv_heads_; ++h) {
            const size_t src = (static_cast<size_t>(t) * n_kv_heads_ + h) * head_dim_;
            const size_t dst = (static_cast<size_t>(h) * capacity_ + length_ + t) * head_dim_;
            store(layer, dst, k_rows + src, v_rows + src, head_dim_);
        }
    }
    if (page_size_ > 0 && n > 0) update_pages(layer, length_, length_ + n);
}

void KvCache::truncate(int length) {
    KASCADE_ASSERT(length >= 0 && length <= length_);
    length_ = length;
    // The last kept page may have been widened by the forgotten positions: rebuild it from the keys it still holds.
    const int page_first = page_size_ > 0 ? length / page_size_ * page_size_ : length;
    if (page_first < length) {
        for (int layer = 0; layer < n_layers_; ++layer) update_pages(layer, page_first, length);
    }
}

void KvCache::advance(int n) {
    KASCADE_ASSERT(length_ + n <= capacity_);
    length_ += n;
}

}  // namespace kascade
