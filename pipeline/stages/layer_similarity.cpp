#include "pipeline/stages/layer_similarity.h"

#include <algorithm>

namespace kascade {

double LayerSimilarity::layer_score(int a, int b) const {
    if (a == b) return 1.0;
    double sum = 0;
    for (int hb = 0; hb < n_kv_heads; ++hb) {
        float best = at(b, a, hb, 0);
        for (int ha = 1; ha < n_kv_heads; ++ha) best = std::max(best, at(b, a, hb, ha));
        sum += best;
    }
    return sum / n_kv_heads;
}

std::vector<int32_t> LayerSimilarity::best_head_map(int a, int b) const {
    std::vector<int32_t> map(n_kv_heads);
    for (int hb = 0; hb < n_kv_heads; ++hb) {
        int best = 0;
        for (int ha = 1; ha < n_kv_heads; ++ha) {
            if (at(b, a, hb, ha) > at(b, a, hb, best)) best = ha;
        }
        map[hb] = best;
    }
    return map;
}

}  // namespace kascade
