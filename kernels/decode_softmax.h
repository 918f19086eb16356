// kernels/decode_softmax.h: the exp2 step of the decode kernels' softmax over one run of scores (internal to the
// decode kernels; not a public API).
#pragma once

#include <algorithm>
#include <limits>

#include "kernels/attention_simd.h"

namespace kascade::detail {

/// e[j] = exp2(s[j] - m) for j < n, m being the maximum of s[0 .. n) (e may be s), rounded to BF16 values when round
/// (BF16 products: the sum is then of the rounded weights, so the output stays a weighted mean). Returns m and puts the
/// sum of the e[j] in *sum. Whole vectors in the widest registers; the last n % lanes scores go through one more vector
/// padded with -inf (exp2 gives 0 there), so no caller needs room past s + n and every weight takes the same exp2.
inline float exp2_from_max(const float* s, float* e, int n, bool round, float* sum) {
    using W = Vec<kWideLanes>;
    const int n_vec = n / W::lanes * W::lanes;
    alignas(64) float tail[W::lanes];
    std::fill(tail, tail + W::lanes, -std::numeric_limits<float>::infinity());
    std::copy(s + n_vec, s + n, tail);
    W::type mx = W::load(tail);
    for (int j = 0; j < n_vec; j += W::lanes) mx = W::max(mx, W::load(s + j));
    const float m = W::hmax(mx);
    const W::type mv = W::set1(m);
    const auto weights = [&](const float* x) {
        const W::type w = W::exp2(W::sub(W::load(x), mv));
        return round ? W::round_bf16(w) : w;
    };
    W::type total = W::zero();
    for (int j = 0; j < n_vec; j += W::lanes) {
        const W::type w = weights(s + j);
        W::store(e + j, w);
        total = W::add(total, w);
    }
    if (n_vec < n) {
        const W::type w = weights(tail);
        W::store(tail, w);
        total = W::add(total, w);
        std::copy(tail, tail + (n - n_vec), e + n_vec);
    }
    *sum = W::hsum(total);
    return m;
}

}  // namespace kascade::detail
