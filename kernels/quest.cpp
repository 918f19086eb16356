// kernels/quest.cpp: Quest page bounds and page scores.
#include "kernels/quest.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/attention_simd.h"
#include "kernels/decode_scoring.h"

namespace kascade {

using detail::kLanes;
using detail::v_add;
using detail::v_hsum;
using detail::v_load;
using detail::v_max;
using detail::v_mul;
using detail::v_zero;
using detail::vf;

namespace {

template <typename T>
void page_bounds_add(const T* keys, int n, int head_dim, bool first, float* min, float* max) {
    int start = 0;
    if (first) {
        for (int p = 0; p < head_dim; ++p) min[p] = max[p] = detail::kv_float(keys[p]);
        start = 1;
    }
    for (int t = start; t < n; ++t) {
        const T* row = keys + static_cast<int64_t>(t) * head_dim;
        for (int p = 0; p < head_dim; ++p) {
            const float x = detail::kv_float(row[p]);
            min[p] = std::min(min[p], x);
            max[p] = std::max(max[p], x);
        }
    }
}

}  // namespace

void key_page_bounds_add(KvPtr keys, int n, int head_dim, bool first, float* min, float* max) {
    KASCADE_ASSERT(keys != nullptr && min != nullptr && max != nullptr && n > 0 && head_dim > 0);
    keys.visit([&](const auto* rows) { page_bounds_add(rows, n, head_dim, first, min, max); });
}

void quest_page_scores(const AttnShape& shape, const float* q, const KeyPageBounds& bounds, TileMass* scores) {
    KASCADE_ASSERT(shape.n_q == 1 && shape.n_k >= 1 && shape.head_dim % kLanes == 0);
    KASCADE_ASSERT(q != nullptr && scores != nullptr && bounds.page > 0 && bounds.min && bounds.max);
    const int page = bounds.page;
    const int own = (shape.n_k - 1) / page;
    KASCADE_ASSERT(bounds.page_stride > own);
    const int first = decode_first_key(shape.n_k, shape.effective_window()) / page;
    const int group = shape.group_size();
    const int d = shape.head_dim;
    scores->n_kv_heads = shape.n_kv_heads;
    scores->n_q_tiles = 1;
    scores->n_k_tiles = own + 1;
    scores->tile = page;
    scores->window = shape.effective_window();
    scores->n_keys = shape.n_k;
    scores->mass.assign(static_cast<size_t>(shape.n_kv_heads) * scores->n_k_tiles, 0.0f);
    const int n_items = shape.n_kv_heads;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < n_items; ++h) {
        float* row = scores->row(h, 0);
        const float* qh = q + static_cast<int64_t>(h) * group * d;
        for (int x = first; x < own; ++x) {
            const float* lo = bounds.min + (static_cast<int64_t>(h) * bounds.page_stride + x) * d;
            const float* hi = bounds.max + (static_cast<int64_t>(h) * bounds.page_stride + x) * d;
            vf acc = v_zero();
            for (int g = 0; g < group; ++g) {
                const float* qg = qh + static_cast<int64_t>(g) * d;
                for (int p = 0; p < d; p += kLanes) {
                    const vf qv = v_load(qg + p);
                    acc = v_add(acc, v_max(v_mul(qv, v_load(lo + p)), v_mul(qv, v_load(hi + p))));
                }
            }
            row[x] = v_hsum(acc);
        }
    }
}

}  // namespace kascade
