// pipeline/runtime/quest_attention.h: the Quest baseline (Tang et al., 2024), a decode-time method.
//
// The KV cache keeps, per layer, KV head and page of `page` positions, the element-wise min and max key vectors
// (KvCache(config, capacity, policy.kv_page_size())). At each decode step a layer scores every page before the query's
// own page by the upper bound sum_d max(q_d * min_d, q_d * max_d), summed over the query heads of the GQA group
// (kernels/quest.h), and attends to the top pages plus its own page. The budget is Kascade's decode budget in keys
// (kernels/decode_scoring.h with tile = page), in whole pages. The first dense_layers layers stay dense (layers 0 and
// 1: the setting the Kascade paper compared against), and a prefill runs dense attention in every layer (and counts as
// dense in the density): Quest selects only for generated tokens.
#pragma once

#include <vector>

#include "kernels/decode_scoring.h"
#include "pipeline/runtime/attention_density.h"
#include "pipeline/runtime/attention_policy.h"

namespace kascade {

struct QuestOptions {
    int page = 16;         ///< keys per page
    TopKRule topk;         ///< budget in keys, rounded up to whole pages
    int dense_layers = 2;  ///< layers 0 .. dense_layers - 1 attend densely
};

class QuestAttention : public AttentionPolicy {
  public:
    QuestAttention(int n_layers, QuestOptions options);

    void attend(const AttentionCall& call) override;
    RunLayerRole layer_role(int layer) const override {
        return layer < options_.dense_layers ? RunLayerRole::Dense : RunLayerRole::Quest;
    }
    int kv_page_size() const override { return options_.page; }

    /// The pages `layer` attended (besides its own) in the last decode call: a decode selection with tile = page.
    const TileSelection& selection(int layer) const { return selections_[layer]; }

  private:
    QuestOptions options_;
    std::vector<TileSelection> selections_;
    TileMass page_scores_;
    DecodeScoringScratch scratch_;
};

}  // namespace kascade
