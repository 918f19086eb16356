// tests/runtime/test_batched_decode.cpp: a batched decode step (Transformer::forward over several sequences, each with
// its own cache and policy) equals the same sequences decoded one at a time, bit for bit, for every attention method
// and both KV cache dtypes; on stories260K (fp32 weights) and on a random GQA model with a sliding window (BF16
// weights, exact and bf16 products), also with caches long enough that the decode kernels split their work into
// pieces, and at thread counts that attend whole sequences per thread and that split each sequence's attention over
// the threads. The sequences have prompts of different lengths, so each step attends a different number of keys per
// sequence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/shared_files.h"
#include "common/temp_dir.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/kascade_attention.h"
#include "pipeline/runtime/lessismore_attention.h"
#include "pipeline/runtime/omnikv_attention.h"
#include "pipeline/runtime/quest_attention.h"
#include "pipeline/runtime/streaming_attention.h"
#include "pipeline/runtime/transformer.h"
#include "reference/random_checkpoint.h"
#include "teacher_forced_decode.h"

namespace kascade {
namespace {

using MakePolicy = std::function<std::unique_ptr<AttentionPolicy>(const ModelConfig&)>;

/// Every method at a budget that selects (10 % of the keys, a floor of 8 tokens, tile 4): its decode keeps a strict
/// subset of the keys once a sequence is longer than a few tiles.
std::vector<std::pair<std::string, MakePolicy>> every_method() {
    const SparseAttentionOptions o{.tile = 4, .topk = {.tiles = 0, .pct = 10, .k_min_tokens = 8}};
    const auto reuse_schedule = [](const ModelConfig& c) {
        AttentionSchedule s = AttentionSchedule::oracle(c.n_layers);
        for (int l = 2; l < c.n_layers; l += 2) {
            s.layers[l].role = LayerRole::Reuse;
            s.layers[l].anchor = l - 1;
            for (int h = 0; h < c.n_kv_heads; ++h) s.layers[l].head_map.push_back((h + 1) % c.n_kv_heads);
        }
        return s;
    };
    return {
        {"dense", [](const ModelConfig&) { return std::make_unique<DenseAttention>(); }},
        {"kascade", [=](const ModelConfig& c) { return std::make_unique<KascadeAttention>(reuse_schedule(c), o); }},
        {"oracle",
         [=](const ModelConfig& c) {
             return std::make_unique<KascadeAttention>(AttentionSchedule::oracle(c.n_layers), o);
         }},
        {"streaming", [=](const ModelConfig& c) { return std::make_unique<StreamingAttention>(c.n_layers, o); }},
        {"quest",
         [=](const ModelConfig& c) {
             return std::make_unique<QuestAttention>(c.n_layers, QuestOptions{.page = 4, .topk = o.topk});
         }},
        {"omnikv",
         [=](const ModelConfig& c) {
             return std::make_unique<OmniKvAttention>(
                 c.n_layers, OmniKvOptions{.tile = 1, .topk = o.topk, .filter_layers = {2, 4}});
         }},
        {"lessismore",
         [=](const ModelConfig& c) {
             return std::make_unique<LessIsMoreAttention>(
                 c.n_layers, LessIsMoreOptions{.tile = 1, .topk = o.topk, .selection_layers = {1, 3}});
         }},
    };
}

/// Each prompt prefilled densely into its own cache, with room for `steps` more positions and the page bounds that
/// `page_size` asks for (AttentionPolicy::kv_page_size()). Every decode of a test starts from copies of these, so the
/// prefill, most of a test's time, runs once per cache layout instead of once per decode.
std::vector<KvCache> prefilled_caches(const Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                                      int steps, int page_size, KvDType kv_dtype) {
    const ModelConfig& c = model.config();
    std::vector<KvCache> caches;
    DenseAttention dense;
    for (const std::vector<int32_t>& prompt : prompts) {
        caches.emplace_back(c, static_cast<int>(prompt.size()) + steps, page_size, kv_dtype);
        std::vector<float> prefill_hidden(prompt.size() * c.dim);
        model.forward(prompt, caches.back(), dense, prefill_hidden.data());
    }
    return caches;
}

/// Decodes `steps` tokens per sequence from the prefilled `caches` (the token at each step is fixed by the test, as
/// in teacher forcing), either every sequence one at a time or all of them in one batched forward per step. Returns
/// the hidden states of every decode step, [step][sequence][dim].
std::vector<float> decode(const Transformer& model, std::vector<KvCache> caches, int steps, const MakePolicy& make,
                          bool batched) {
    const ModelConfig& c = model.config();
    const int n_seq = static_cast<int>(caches.size());
    std::vector<std::unique_ptr<AttentionPolicy>> policies;
    for (int s = 0; s < n_seq; ++s) policies.push_back(make(c));
    std::vector<float> hidden(static_cast<size_t>(steps) * n_seq * c.dim);
    std::vector<int32_t> tokens(n_seq);
    for (int step = 0; step < steps; ++step) {
        for (int s = 0; s < n_seq; ++s) tokens[s] = 3 + (step * 31 + s * 17) % (c.vocab_size - 3);
        float* out = hidden.data() + static_cast<size_t>(step) * n_seq * c.dim;
        if (batched) {
            std::vector<ForwardSequence> batch;
            for (int s = 0; s < n_seq; ++s) batch.push_back({std::span(&tokens[s], 1), &caches[s], policies[s].get()});
            model.forward(batch, out);
        } else {
            for (int s = 0; s < n_seq; ++s)
                model.forward(std::span(&tokens[s], 1), caches[s], *policies[s], out + static_cast<size_t>(s) * c.dim);
        }
    }
    return hidden;
}

/// Sets the OpenMP thread count for its scope.
class ThreadCount {
  public:
    explicit ThreadCount(int threads) : before_(omp_get_max_threads()) { omp_set_num_threads(threads); }
    ~ThreadCount() { omp_set_num_threads(before_); }
    ThreadCount(const ThreadCount&) = delete;
    ThreadCount& operator=(const ThreadCount&) = delete;

  private:
    int before_;
};

void expect_batched_equals_single(const Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                                  int steps) {
    const int n_seq = static_cast<int>(prompts.size());
    for (KvDType kv : {KvDType::F32, KvDType::BF16}) {
        std::map<int, std::vector<KvCache>> prefilled;  // by page size
        for (const auto& [name, make] : every_method()) {
            SCOPED_TRACE(name + " kv " + std::string(mode_name(kv)));
            const int page_size = make(model.config())->kv_page_size();
            if (!prefilled.contains(page_size))
                prefilled.emplace(page_size, prefilled_caches(model, prompts, steps, page_size, kv));
            const std::vector<KvCache>& caches = prefilled.at(page_size);
            const std::vector<float> single = decode(model, caches, steps, make, false);
            // As many threads as sequences: each thread attends whole sequences; one more: each sequence's attention
            // is split over the threads (Transformer::attend_sequences).
            for (int threads : {n_seq, n_seq + 1}) {
                SCOPED_TRACE(std::to_string(threads) + " threads");
                const ThreadCount scope(threads);
                const std::vector<float> batched = decode(model, caches, steps, make, true);
                ASSERT_EQ(single.size(), batched.size());
                // Bitwise: memcmp, not a tolerance (and not ==, which would call -0 and 0 equal).
                EXPECT_EQ(std::memcmp(single.data(), batched.data(), single.size() * sizeof(float)), 0);
            }
        }
    }
}

TEST(BatchedDecode, EqualsSingleSequenceDecodesBitwiseOnStories260K) {
    const ModelWeights w = load_model(test::kStoriesBin);
    const Transformer model(w);
    std::vector<std::vector<int32_t>> prompts;
    for (int length : {37, 120, 64, 90, 1}) prompts.push_back(test::tokens_for_test(length, w.config.vocab_size));
    expect_batched_equals_single(model, prompts, 12);
}

TEST(BatchedDecode, EqualsSingleSequenceDecodesBitwiseOnAWindowedGqaModel) {
    test::TempDir dir("batched-decode-window");
    naive::write_random_checkpoint(test::small_windowed_gqa_config(12), dir.path(), 53);
    const ModelWeights w = load_model(dir.path());
    std::vector<std::vector<int32_t>> prompts;
    for (int length : {30, 7, 45}) prompts.push_back(test::tokens_for_test(length, w.config.vocab_size));
    // BF16 weights: both numerics of the products (the bf16 one rounds the activation rows it packs).
    for (MatmulPrecision precision : {MatmulPrecision::Exact, MatmulPrecision::Bf16}) {
        SCOPED_TRACE("matmul " + std::string(mode_name(precision)));
        const Transformer model(w, 0, precision);
        expect_batched_equals_single(model, prompts, 10);
    }
}

TEST(BatchedDecode, EqualsSingleSequenceDecodesBitwiseOnCachesOfManyPieces) {
    // Past the decode kernels' piece sizes (256 keys per dense decode piece, 1024 per anchor scoring piece) and inside
    // a 1200-key window, so each sequence's attention splits into pieces over the threads and merges them.
    test::TempDir dir("batched-decode-long");
    naive::write_random_checkpoint(test::small_windowed_gqa_config(1200), dir.path(), 71);
    const ModelWeights w = load_model(dir.path());
    const Transformer model(w);
    std::vector<std::vector<int32_t>> prompts;
    for (int length : {1500, 1100, 1300}) prompts.push_back(test::tokens_for_test(length, w.config.vocab_size));
    expect_batched_equals_single(model, prompts, 2);
}

}  // namespace
}  // namespace kascade
