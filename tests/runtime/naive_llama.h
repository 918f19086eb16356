// tests/runtime/naive_llama.h: an independent, obviously-correct Llama forward pass for the tests.
//
// Double precision, plain loops, materialised attention scores; it shares no code with the runtime (not the
// loaders, not the kernels), so agreement between the two is evidence that both are right.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace naive {

struct Layer {
    std::vector<double> attn_norm, wq, wk, wv, wo, mlp_norm, gate, up, down;  // [out][in] matrices
};

struct Model {
    int dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab = 0;
    double rope_theta = 10000, eps = 1e-5;
    bool interleaved_rope = false;  // llama2.c pairs (2j, 2j+1); HF pairs (j, j + head_dim/2)
    std::vector<double> embed, final_norm, lm_head;
    std::vector<Layer> layers;
};

inline std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, int out, int in) {
    std::vector<double> y(out, 0.0);
    for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) y[o] += w[static_cast<size_t>(o) * in + i] * x[i];
    return y;
}

inline std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
}

inline void rope(std::vector<double>& v, int n_heads, int head_dim, int pos, double theta, bool interleaved) {
    for (int h = 0; h < n_heads; ++h) {
        for (int j = 0; j < head_dim / 2; ++j) {
            const double angle = pos * std::pow(theta, -2.0 * j / head_dim);
            const int a = h * head_dim + (interleaved ? 2 * j : j);
            const int b = h * head_dim + (interleaved ? 2 * j + 1 : j + head_dim / 2);
            const double x0 = v[a], x1 = v[b];
            v[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
            v[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
        }
    }
}

/// Logits [tokens.size()][vocab] of a causal forward pass over `tokens` from position 0.
inline std::vector<std::vector<double>> logits(const Model& m, const std::vector<int32_t>& tokens) {
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
            q[t] = matvec(L.wq, h, qd, m.dim);
            k[t] = matvec(L.wk, h, kvd, m.dim);
            v[t] = matvec(L.wv, h, kvd, m.dim);
            rope(q[t], m.n_heads, m.head_dim, t, m.rope_theta, m.interleaved_rope);
            rope(k[t], m.n_kv_heads, m.head_dim, t, m.rope_theta, m.interleaved_rope);
        }
        const int group = m.n_heads / m.n_kv_heads;
        for (int t = 0; t < n; ++t) {
            std::vector<double> att(qd, 0.0);
            for (int h = 0; h < m.n_heads; ++h) {
                const int kvh = h / group;
                std::vector<double> s(t + 1);
                double s_max = -1e300;
                for (int j = 0; j <= t; ++j) {
                    double dot = 0;
                    for (int i = 0; i < m.head_dim; ++i) dot += q[t][h * m.head_dim + i] * k[j][kvh * m.head_dim + i];
                    s[j] = dot / std::sqrt(static_cast<double>(m.head_dim));
                    s_max = std::max(s_max, s[j]);
                }
                double sum = 0;
                for (int j = 0; j <= t; ++j) sum += s[j] = std::exp(s[j] - s_max);
                for (int j = 0; j <= t; ++j)
                    for (int i = 0; i < m.head_dim; ++i)
                        att[h * m.head_dim + i] += s[j] / sum * v[j][kvh * m.head_dim + i];
            }
            const auto o = matvec(L.wo, att, m.dim, qd);
            for (int i = 0; i < m.dim; ++i) x[t][i] += o[i];
            const auto h2 = rmsnorm(x[t], L.mlp_norm, m.eps);
            auto g = matvec(L.gate, h2, m.hidden, m.dim);
            const auto u = matvec(L.up, h2, m.hidden, m.dim);
            for (int i = 0; i < m.hidden; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
            const auto d = matvec(L.down, g, m.dim, m.hidden);
            for (int i = 0; i < m.dim; ++i) x[t][i] += d[i];
        }
    }
    std::vector<std::vector<double>> out(n);
    for (int t = 0; t < n; ++t) out[t] = matvec(m.lm_head, rmsnorm(x[t], m.final_norm, m.eps), m.vocab, m.dim);
    return out;
}

}  // namespace naive
