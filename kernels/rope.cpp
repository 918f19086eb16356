#include "kernels/rope.h"

#include <cmath>

#include "base/error.h"
#include "kernels/elementwise_parallel.h"

namespace kascade {

RopeTable rope_table(int head_dim, int max_positions, std::span<const double> inv_freq, double attention_factor) {
    KASCADE_ASSERT(head_dim % 2 == 0 && static_cast<int>(inv_freq.size()) == head_dim / 2);
    RopeTable table;
    table.head_dim = head_dim;
    table.max_positions = max_positions;
    const int half = head_dim / 2;
    table.cos.resize(static_cast<size_t>(max_positions) * half);
    table.sin.resize(static_cast<size_t>(max_positions) * half);
    for (int p = 0; p < max_positions; ++p) {
        for (int j = 0; j < half; ++j) {
            const double angle = p * inv_freq[j];
            table.cos[static_cast<size_t>(p) * half + j] = static_cast<float>(attention_factor * std::cos(angle));
            table.sin[static_cast<size_t>(p) * half + j] = static_cast<float>(attention_factor * std::sin(angle));
        }
    }
    return table;
}

void rope_apply(const RopeTable& table, bool interleaved, float* x, int64_t n_rows, int n_heads, int64_t pos0) {
    const int d = table.head_dim;
    const int half = d / 2;
    // Pair j is (j*lo_step, j*lo_step + hi_offset): (2j, 2j+1) interleaved, (j, j+half) rotate_half.
    const int lo_step = interleaved ? 2 : 1;
    const int hi_offset = interleaved ? 1 : half;
#pragma omp parallel for schedule(static) if (n_rows * n_heads * d > kParallelMinElements)
    for (int64_t r = 0; r < n_rows; ++r) {
        const float* c = table.cos.data() + (pos0 + r) * half;
        const float* s = table.sin.data() + (pos0 + r) * half;
        for (int h = 0; h < n_heads; ++h) {
            float* head = x + (r * n_heads + h) * d;
            for (int j = 0; j < half; ++j) {
                float& a = head[j * lo_step];
                float& b = head[j * lo_step + hi_offset];
                const float a0 = a, b0 = b;
                a = a0 * c[j] - b0 * s[j];
                b = a0 * s[j] + b0 * c[j];
            }
        }
    }
}

}  // namespace kascade
