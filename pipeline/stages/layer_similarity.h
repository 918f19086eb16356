// pipeline/stages/layer_similarity.h: the similarity of every (anchor layer a, later layer b) pair that schedules
// are chosen from, as plain data.
//
// head[b][a][hb][ha] is how well anchor a's KV head ha's tile selection serves layer b's KV head hb (mass recall or
// Jaccard, aggregated over query tiles by mean or min, then averaged over windows). Entries with a >= b are unused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kascade {

struct LayerSimilarity {
    int n_layers = 0;
    int n_kv_heads = 0;
    std::vector<float> head;        ///< [n_layers(b)][n_layers(a)][n_kv_heads(b)][n_kv_heads(a)]
    std::vector<float> importance;  ///< [n_layers] 1 - mean cos(x_in, x_in + attn_out), from the capture

    float at(int b, int a, int hb, int ha) const {
        return head[((static_cast<size_t>(b) * n_layers + a) * n_kv_heads + hb) * n_kv_heads + ha];
    }
    float& at(int b, int a, int hb, int ha) {
        return head[((static_cast<size_t>(b) * n_layers + a) * n_kv_heads + hb) * n_kv_heads + ha];
    }

    /// Layer score: mean over b's KV heads of the best anchor head (the paper's head-remapped similarity).
    double layer_score(int a, int b) const;
    /// For each KV head of b, the KV head of a that serves it best (lowest index on ties).
    std::vector<int32_t> best_head_map(int a, int b) const;
};

}  // namespace kascade
