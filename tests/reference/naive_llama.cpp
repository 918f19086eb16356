// tests/reference/naive_llama.cpp: the naive forward pass (naive_llama.h).
#include "reference/naive_llama.h"

#include <algorithm>
#include <cmath>

namespace naive {
namespace {

/// x rounded to the nearest BF16 value (ties to even), as a double.
double round_to_bf16(double x) {
    if (x == 0 || !std::isfinite(x)) return x;
    int exponent;
    std::frexp(x, &exponent);                          // |x| in [2^(e-1), 2^e)
    const double ulp = std::ldexp(1.0, exponent - 8);  // BF16 keeps 8 significant bits
    return std::nearbyint(x / ulp) * ulp;              // default rounding mode: nearest, ties to even
}

std::vector<double> matvec(const Weights& w, std::vector<double> x, int out, int in, const Weights& bias = {},
                           bool bf16_inputs = false) {
    if (bf16_inputs) {
        for (double& v : x) v = round_to_bf16(v);
    }
    std::vector<double> y(out, 0.0);
    for (int o = 0; o < out; ++o) {
        for (int i = 0; i < in; ++i) y[o] += w[static_cast<size_t>(o) * in + i] * x[i];
        if (!bias.empty()) y[o] += bias[o];
    }
    return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const Weights& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
}

/// RMSNorm of each head_dim slice of v on its own.
void head_rmsnorm(std::vector<double>& v, int n_heads, int head_dim, const Weights& w, double eps) {
    for (int h = 0; h < n_heads; ++h) {
        const std::vector<double> head(v.begin() + h * head_dim, v.begin() + (h + 1) * head_dim);
        const std::vector<double> normed = rmsnorm(head, w, eps);
        std::copy(normed.begin(), normed.end(), v.begin() + h * head_dim);
    }
}

void rope(std::vector<double>& v, int n_heads, int pos, const Model& m) {
    const int head_dim = m.head_dim;
    const bool interleaved = m.interleaved_rope;
    for (int h = 0; h < n_heads; ++h) {
        for (int j = 0; j < head_dim / 2; ++j) {
            const double freq =
                m.rope_inv_freq.empty() ? std::pow(m.rope_theta, -2.0 * j / head_dim) : m.rope_inv_freq[j];
            const double angle = pos * freq;
            const double c = m.rope_attention_factor * std::cos(angle), s = m.rope_attention_factor * std::sin(angle);
            const int a = h * head_dim + (interleaved ? 2 * j : j);
            const int b = h * head_dim + (interleaved ? 2 * j + 1 : j + head_dim / 2);
            const double x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}

}  // namespace

std::vector<std::vector<double>> logits(const Model& m, const std::vector<int32_t>& tokens) {
    const int n = static_cast<int>(tokens.size());
    const int qd = m.n_heads * m.head_dim, kvd = m.n_kv_heads * m.head_dim;
    std::vector<std::vector<double>> x(n);
    for (int t = 0; t < n; ++t)
        x[t].assign(m.embed.begin() + static_cast<size_t>(tokens[t]) * m.dim,
                    m.embed.begin() + static_cast<size_t>(tokens[t] + 1) * m.dim);
    for (const Layer& L : m.layers) {
        std::vector<std::vector<double>> q(n), k(n), v(n);
        for (int t = 0; t < n; ++t) {
            const auto h = rmsnorm(x[t], L.attn_norm, m.eps);
            q[t] = matvec(L.wq, h, qd, m.dim, L.bq, m.bf16_matmul_inputs);
            k[t] = matvec(L.wk, h, kvd, m.dim, L.bk, m.bf16_matmul_inputs);
            v[t] = matvec(L.wv, h, kvd, m.dim, L.bv, m.bf16_matmul_inputs);
            if (!L.q_norm.empty()) head_rmsnorm(q[t], m.n_heads, m.head_dim, L.q_norm, m.eps);
            if (!L.k_norm.empty()) head_rmsnorm(k[t], m.n_kv_heads, m.head_dim, L.k_norm, m.eps);
            rope(q[t], m.n_heads, t, m);
            rope(k[t], m.n_kv_heads, t, m);
            if (m.bf16_kv) {
                for (double& e : k[t]) e = round_to_bf16(e);
                for (double& e : v[t]) e = round_to_bf16(e);
            }
        }
        const int group = m.n_heads / m.n_kv_heads;
        for (int t = 0; t < n; ++t) {
            std::vector<double> att(qd, 0.0);
            for (int h = 0; h < m.n_heads; ++h) {
                const int kvh = h / group;
                // Keys before the window get probability 0 (score -inf).
                const int first = L.window > 0 ? std::max(0, t - L.window + 1) : 0;
                std::vector<double> s(t + 1, 0.0);
                double s_max = -1e300;
                for (int j = first; j <= t; ++j) {
                    double dot = 0;
                    for (int i = 0; i < m.head_dim; ++i) dot += q[t][h * m.head_dim + i] * k[j][kvh * m.head_dim + i];
                    s[j] = dot / std::sqrt(static_cast<double>(m.head_dim));
                    s_max = std::max(s_max, s[j]);
                }
                double sum = 0;
                for (int j = first; j <= t; ++j) sum += s[j] = std::exp(s[j] - s_max);
                for (int j = first; j <= t; ++j)
                    for (int i = 0; i < m.head_dim; ++i)
                        att[h * m.head_dim + i] += s[j] / sum * v[j][kvh * m.head_dim + i];
            }
            const auto o = matvec(L.wo, att, m.dim, qd, L.bo, m.bf16_matmul_inputs);
            for (int i = 0; i < m.dim; ++i) x[t][i] += o[i];
            const auto h2 = rmsnorm(x[t], L.mlp_norm, m.eps);
            auto g = matvec(L.gate, h2, m.hidden, m.dim, {}, m.bf16_matmul_inputs);
            const auto u = matvec(L.up, h2, m.hidden, m.dim, {}, m.bf16_matmul_inputs);
            for (int i = 0; i < m.hidden; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
            const auto d = matvec(L.down, g, m.dim, m.hidden, {}, m.bf16_matmul_inputs);
            for (int i = 0; i < m.dim; ++i) x[t][i] += d[i];
        }
    }
    std::vector<std::vector<double>> out(n);
    for (int t = 0; t < n; ++t) {
        out[t] = matvec(m.lm_head, rmsnorm(x[t], m.final_norm, m.eps), m.vocab, m.dim, {}, m.bf16_matmul_inputs);
    }
    return out;
}

}  // namespace naive
