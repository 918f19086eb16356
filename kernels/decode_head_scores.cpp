// kernels/decode_head_scores.cpp: per-head scores and probabilities of one decode query.
#include "kernels/decode_head_scores.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/error.h"
#include "kernels/attention_simd.h"
#include "kernels/decode_scoring.h"

namespace kascade {

namespace {

template <typename T>
void head_scores(const AttnShape& shape, const float* q, const T* k, int h, float* row) {
    const int d = shape.head_dim;
    const int first = decode_first_key(shape.n_k, shape.effective_window());
    const float* qh = q + static_cast<int64_t>(h) * d;
    const T* kh = k + static_cast<int64_t>(h / shape.group_size()) * shape.kv_stride * d;
    std::fill(row, row + first, -std::numeric_limits<float>::infinity());
    for (int j = first; j < shape.n_k; ++j) {
        const T* kj = kh + static_cast<int64_t>(j) * d;
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int x = 0; x < d; ++x) dot += qh[x] * detail::kv_float(kj[x]);
        row[j] = dot * shape.scale;
    }
}

void head_scores(const AttnShape& shape, const float* q, KvPtr k, int h, float* row) {
    k.visit([&](const auto* rows) { head_scores(shape, q, rows, h, row); });
}

}  // namespace

void decode_head_scores(const AttnShape& shape, const float* q, KvPtr k, float* scores) {
    KASCADE_ASSERT(shape.n_q == 1 && shape.n_k >= 1);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < shape.n_q_heads; ++h) head_scores(shape, q, k, h, scores + static_cast<int64_t>(h) * shape.n_k);
}

void decode_head_probabilities(const AttnShape& shape, const float* q, KvPtr k, float* probabilities) {
    KASCADE_ASSERT(shape.n_q == 1 && shape.n_k >= 1);
    const int first = decode_first_key(shape.n_k, shape.effective_window());
#pragma omp parallel for schedule(static)
    for (int h = 0; h < shape.n_q_heads; ++h) {
        float* row = probabilities + static_cast<int64_t>(h) * shape.n_k;
        head_scores(shape, q, k, h, row);
        const float max = *std::max_element(row + first, row + shape.n_k);
        double sum = 0;
        for (int j = first; j < shape.n_k; ++j) {
            row[j] = std::exp(row[j] - max);
            sum += row[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        std::fill(row, row + first, 0.0f);
        for (int j = first; j < shape.n_k; ++j) row[j] *= inv;
    }
}

}  // namespace kascade
