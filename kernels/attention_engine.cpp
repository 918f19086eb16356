// kernels/attention_engine.cpp: register-blocked score and value micro-kernels and the vertical online softmax of
// kernels/attention_engine.h.
#include "kernels/attention_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "kernels/attention_simd.h"

namespace kascade::detail {
namespace {

constexpr int kRowBlock = 6;  ///< rows per micro-kernel: 6 x 2 vectors = 12 accumulators, 2 loads, 1 broadcast

// s[r][c0 .. c0+16) = sum_p k[r][p] * qt[p][c0 .. c0+16) for r < R, in the widest registers (one or two per panel).
template <int R>
inline void score_kernel(const float* k, int d, const float* qt, int n_pad, int c0, float* s) {
    using O = Vec<kWideLanes>;
    using V = O::type;
    constexpr int NP = kPanel / O::lanes;
    static_assert(NP * O::lanes == kPanel);
    V acc[R][NP];
    KASCADE_UNROLL
    for (int r = 0; r < R; ++r) {
        KASCADE_UNROLL
        for (int n = 0; n < NP; ++n) acc[r][n] = O::zero();
    }
    const float* qp = qt + c0;
    for (int p = 0; p < d; ++p, qp += n_pad) {
        V b[NP];
        KASCADE_UNROLL
        for (int n = 0; n < NP; ++n) b[n] = O::load(qp + n * O::lanes);
        KASCADE_UNROLL
        for (int r = 0; r < R; ++r) {
            const V a = O::set1(k[r * d + p]);
            KASCADE_UNROLL
            for (int n = 0; n < NP; ++n) acc[r][n] = O::fma(a, b[n], acc[r][n]);
        }
    }
    KASCADE_UNROLL
    for (int r = 0; r < R; ++r) {
        KASCADE_UNROLL
        for (int n = 0; n < NP; ++n) O::store(s + r * n_pad + c0 + n * O::lanes, acc[r][n]);
    }
}

template <int R>
void score_rows(const float* k, int d, const float* qt, int n_pad, float* s) {
    for (int c0 = 0; c0 < n_pad; c0 += kPanel) score_kernel<R>(k, d, qt, n_pad, c0, s);
}

// o[c0+r][j0 .. j0+NW*L) = o * alpha[c0+r] + sum_kk p[kk][c0+r] * v[kk][j0 ..] for r < R, NW registers of L lanes.
template <int L, int R, int NW>
inline void value_kernel_in(const float* p, int n_pad, int c0, const float* v, int d, int j0, int n_keys, float* o,
                            const float* alpha) {
    using O = Vec<L>;
    using V = typename O::type;
    V acc[R][NW];
    KASCADE_UNROLL
    for (int r = 0; r < R; ++r) {
        const V a = O::set1(alpha[c0 + r]);
        KASCADE_UNROLL
        for (int n = 0; n < NW; ++n) acc[r][n] = O::mul(O::load(o + (c0 + r) * d + j0 + n * O::lanes), a);
    }
    for (int kk = 0; kk < n_keys; ++kk) {
        V vv[NW];
        KASCADE_UNROLL
        for (int n = 0; n < NW; ++n) vv[n] = O::load(v + kk * d + j0 + n * O::lanes);
        const float* pk = p + kk * n_pad + c0;
        KASCADE_UNROLL
        for (int r = 0; r < R; ++r) {
            const V a = O::set1(pk[r]);
            KASCADE_UNROLL
            for (int n = 0; n < NW; ++n) acc[r][n] = O::fma(a, vv[n], acc[r][n]);
        }
    }
    KASCADE_UNROLL
    for (int r = 0; r < R; ++r) {
        KASCADE_UNROLL
        for (int n = 0; n < NW; ++n) O::store(o + (c0 + r) * d + j0 + n * O::lanes, acc[r][n]);
    }
}

// The same for NV 8-lane vectors of columns: in the widest registers where they hold them whole.
template <int R, int NV>
inline void value_kernel(const float* p, int n_pad, int c0, const float* v, int d, int j0, int n_keys, float* o,
                         const float* alpha) {
    constexpr int kRatio = kWideLanes / kLanes;
    if constexpr (NV % kRatio == 0)
        value_kernel_in<kWideLanes, R, NV / kRatio>(p, n_pad, c0, v, d, j0, n_keys, o, alpha);
    else
        value_kernel_in<kLanes, R, NV>(p, n_pad, c0, v, d, j0, n_keys, o, alpha);
}

template <int NV>
void value_columns(const QueryBlock& b, const float* v, int j0, int n_keys) {
    const int d = b.head_dim;
    int c0 = 0;
    for (; c0 + kRowBlock <= b.n_cols; c0 += kRowBlock)
        value_kernel<kRowBlock, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
    switch (b.n_cols - c0) {
        case 5:
            value_kernel<5, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
            break;
        case 4:
            value_kernel<4, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
            break;
        case 3:
            value_kernel<3, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
            break;
        case 2:
            value_kernel<2, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
            break;
        case 1:
            value_kernel<1, NV>(b.s, b.n_pad, c0, v, d, j0, n_keys, b.o, b.alpha);
            break;
        default:
            break;
    }
}

}  // namespace

size_t query_block_floats(int head_dim, int group, int max_rows, int max_keys) {
    const size_t n_pad = round_up(group * max_rows, kPanel);
    return n_pad * (2 * static_cast<size_t>(head_dim) + max_keys + 4) + static_cast<size_t>(max_keys) * head_dim;
}

QueryBlock query_block_bind(float* scratch, int head_dim, int group, int max_rows, int max_keys) {
    static_assert(sizeof(int32_t) == sizeof(float));
    QueryBlock b;
    b.head_dim = head_dim;
    b.group = group;
    b.max_keys = max_keys;
    const size_t cap = round_up(group * max_rows, kPanel);
    b.qt = scratch;
    b.o = b.qt + cap * head_dim;
    b.s = b.o + cap * head_dim;
    b.m = b.s + cap * max_keys;
    b.l = b.m + cap;
    b.alpha = b.l + cap;
    b.pos = reinterpret_cast<int32_t*>(b.alpha + cap);
    b.kv = b.alpha + 2 * cap;
    return b;
}

void query_block_load(QueryBlock& b, const AttnShape& shape, const float* q, int kv_head, int row0, int n_rows,
                      float prescale, bool with_output) {
    const int d = b.head_dim;
    b.n_rows = n_rows;
    b.n_cols = b.group * n_rows;
    b.n_pad = round_up(b.n_cols, kPanel);
    b.min_pos = shape.n_k - shape.n_q + row0;
    b.window = shape.effective_window();
    const int rs = shape.q_row_stride();
    for (int g = 0; g < b.group; ++g) {
        const int h = kv_head * b.group + g;
        for (int i = 0; i < n_rows; ++i) {
            const int c = g * n_rows + i;
            const float* qrow = q + static_cast<int64_t>(row0 + i) * rs + static_cast<int64_t>(h) * d;
            for (int p = 0; p < d; ++p) b.qt[p * b.n_pad + c] = qrow[p] * prescale;
            b.pos[c] = b.min_pos + i;
        }
    }
    for (int c = b.n_cols; c < b.n_pad; ++c) {
        for (int p = 0; p < d; ++p) b.qt[p * b.n_pad + c] = 0.0f;
        b.pos[c] = kPosPadding;
    }
    std::fill(b.m, b.m + b.n_pad, kNegInf);
    std::fill(b.l, b.l + b.n_pad, 0.0f);
    if (with_output) std::fill(b.o, b.o + static_cast<size_t>(b.n_pad) * d, 0.0f);
}

namespace {

// s = K[0 .. n_keys) . qt, no mask.
void raw_scores(QueryBlock& b, const float* k, int n_keys) {
    KASCADE_ASSERT(n_keys > 0 && n_keys <= b.max_keys);
    const int d = b.head_dim;
    int r0 = 0;
    for (; r0 + kRowBlock <= n_keys; r0 += kRowBlock)
        score_rows<kRowBlock>(k + r0 * d, d, b.qt, b.n_pad, b.s + r0 * b.n_pad);
    const float* kr = k + r0 * d;
    float* sr = b.s + r0 * b.n_pad;
    switch (n_keys - r0) {
        case 5:
            score_rows<5>(kr, d, b.qt, b.n_pad, sr);
            break;
        case 4:
            score_rows<4>(kr, d, b.qt, b.n_pad, sr);
            break;
        case 3:
            score_rows<3>(kr, d, b.qt, b.n_pad, sr);
            break;
        case 2:
            score_rows<2>(kr, d, b.qt, b.n_pad, sr);
            break;
        case 1:
            score_rows<1>(kr, d, b.qt, b.n_pad, sr);
            break;
        default:
            break;
    }
}

}  // namespace

void query_block_scores(QueryBlock& b, KvPtr k, int n_keys, int key0) {
    KASCADE_ASSERT(n_keys <= b.max_keys);
    raw_scores(b, kv_as_float(k, static_cast<int64_t>(n_keys) * b.head_dim, b.kv), n_keys);
    // Causal mask: only key rows after the block's first query can be hidden from some column.
    for (int kk = std::max(0, b.min_pos + 1 - key0); kk < n_keys; ++kk) {
        float* row = b.s + kk * b.n_pad;
        for (int c = 0; c < b.n_pad; c += kLanes)
            v_store(row + c, v_mask_lt(v_load(row + c), b.pos + c, key0 + kk, kNegInf));
    }
    // Window mask: key j is hidden from the column at position p when j <= p - window, which can only happen for
    // keys up to the block's last query - window.
    if (b.window > 0) {
        const int n_masked = std::min(n_keys, b.min_pos + b.n_rows - b.window - key0);
        for (int kk = 0; kk < n_masked; ++kk) {
            float* row = b.s + kk * b.n_pad;
            for (int c = 0; c < b.n_pad; c += kLanes)
                v_store(row + c, v_mask_gt(v_load(row + c), b.pos + c, key0 + kk + b.window - 1, kNegInf));
        }
    }
}

void query_block_scores_gathered(QueryBlock& b, const float* k, int n_keys, const int32_t* key_pos) {
    raw_scores(b, k, n_keys);
    for (int kk = 0; kk < n_keys; ++kk) {
        KASCADE_ASSERT(key_pos[kk] < b.min_pos);
        // Window mask as in query_block_scores: hidden from the columns at positions p >= key + window.
        if (b.window == 0 || key_pos[kk] + b.window > b.min_pos + b.n_rows - 1) continue;
        float* row = b.s + kk * b.n_pad;
        for (int c = 0; c < b.n_pad; c += kLanes)
            v_store(row + c, v_mask_gt(v_load(row + c), b.pos + c, key_pos[kk] + b.window - 1, kNegInf));
    }
}

int window_key_begin(int min_pos, int window, int align) {
    if (window <= 0 || min_pos - window + 1 <= 0) return 0;
    return (min_pos - window + 1) / align * align;
}

void query_block_softmax(QueryBlock& b, int n_keys) {
    const int n_pad = b.n_pad;
    for (int c = 0; c < n_pad; c += kLanes) {
        const vf m_old = v_load(b.m + c);
        vf m_new = m_old;
        for (int kk = 0; kk < n_keys; ++kk) m_new = v_max(m_new, v_load(b.s + kk * n_pad + c));
        // A column that has seen only masked keys (possible with a window) has m_new = -inf: exponentiate against 0
        // instead so that its probabilities are exp2(-inf) = 0 rather than exp2(-inf - -inf) = NaN.
        const vf m_ref = v_neginf_to_zero(m_new);
        const vf alpha = v_exp2(v_sub(m_old, m_ref));
        vf sum0 = v_zero(), sum1 = v_zero();
        int kk = 0;
        for (; kk + 1 < n_keys; kk += 2) {
            const vf e0 = v_exp2(v_sub(v_load(b.s + kk * n_pad + c), m_ref));
            const vf e1 = v_exp2(v_sub(v_load(b.s + (kk + 1) * n_pad + c), m_ref));
            v_store(b.s + kk * n_pad + c, e0);
            v_store(b.s + (kk + 1) * n_pad + c, e1);
            sum0 = v_add(sum0, e0);
            sum1 = v_add(sum1, e1);
        }
        if (kk < n_keys) {
            const vf e = v_exp2(v_sub(v_load(b.s + kk * n_pad + c), m_ref));
            v_store(b.s + kk * n_pad + c, e);
            sum0 = v_add(sum0, e);
        }
        v_store(b.l + c, v_fma(v_load(b.l + c), alpha, v_add(sum0, sum1)));
        v_store(b.m + c, m_new);
        v_store(b.alpha + c, alpha);
    }
}

void query_block_exp_fixed(QueryBlock& b, int n_keys, const float* m_fixed) {
    const int n_pad = b.n_pad;
    for (int kk = 0; kk < n_keys; ++kk) {
        float* row = b.s + kk * n_pad;
        for (int c = 0; c < n_pad; c += kLanes) v_store(row + c, v_exp2(v_sub(v_load(row + c), v_load(m_fixed + c))));
    }
}

void query_block_accumulate(QueryBlock& b, KvPtr v_rows, int n_keys) {
    KASCADE_ASSERT(n_keys <= b.max_keys);
    const int d = b.head_dim;
    const float* v = kv_as_float(v_rows, static_cast<int64_t>(n_keys) * d, b.kv);
    int j0 = 0;
    for (; j0 + 2 * kLanes <= d; j0 += 2 * kLanes) value_columns<2>(b, v, j0, n_keys);
    if (j0 < d) value_columns<1>(b, v, j0, n_keys);
}

void query_block_tile_sums(const QueryBlock& b, int n_keys, int tile, float* out) {
    const int n_pad = b.n_pad;
    for (int t0 = 0, t = 0; t0 < n_keys; t0 += tile, ++t) {
        const int t1 = std::min(n_keys, t0 + tile);
        for (int c = 0; c < n_pad; c += kLanes) {
            vf sum = v_zero();
            for (int kk = t0; kk < t1; ++kk) sum = v_add(sum, v_load(b.s + kk * n_pad + c));
            v_store(out + t * n_pad + c, sum);
        }
    }
}

void query_block_tile_max(const QueryBlock& b, int n_keys, int tile, float* out) {
    const int n_pad = b.n_pad;
    for (int t0 = 0, t = 0; t0 < n_keys; t0 += tile, ++t) {
        const int t1 = std::min(n_keys, t0 + tile);
        for (int c = 0; c < n_pad; c += kLanes) {
            vf mx = v_set1(kNegInf);
            for (int kk = t0; kk < t1; ++kk) mx = v_max(mx, v_load(b.s + kk * n_pad + c));
            v_store(out + t * n_pad + c, mx);
        }
    }
}

void query_block_store(const QueryBlock& b, const AttnShape& shape, int kv_head, int row0, float* out, float* lse) {
    const int d = b.head_dim;
    const int rs = shape.q_row_stride();
    for (int g = 0; g < b.group; ++g) {
        const int h = kv_head * b.group + g;
        for (int i = 0; i < b.n_rows; ++i) {
            const int c = g * b.n_rows + i;
            if (out != nullptr) {
                const vf inv = v_set1(1.0f / b.l[c]);
                float* orow = out + static_cast<int64_t>(row0 + i) * rs + static_cast<int64_t>(h) * d;
                const float* acc = b.o + static_cast<int64_t>(c) * d;
                for (int j = 0; j < d; j += kLanes) v_store(orow + j, v_mul(v_load(acc + j), inv));
            }
            if (lse != nullptr)
                lse[static_cast<int64_t>(h) * shape.n_q + row0 + i] = (b.m[c] + std::log2(b.l[c])) * kLn2;
        }
    }
}

}  // namespace kascade::detail
