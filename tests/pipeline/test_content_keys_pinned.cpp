// tests/pipeline/test_content_keys_pinned.cpp: the content keys of fixed inputs, written down as literals.
//
// A stored result is found by its content key alone (artifacts/<stage>/<key>.h5, runs.run_key, task_runs.task_key):
// a change in how any key is hashed or which fields go into it, made by accident, would orphan every result users
// have stored, and every sweep would silently recompute. These literals were computed once, when the key layout was
// last changed on purpose; a test failing here means either an accidental change (fix the code) or a deliberate one
// (bump the stage's format version, say why in the commit, and write the new literals down).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include "pipeline/stages/capture_stage.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/dataset_task_stage.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/schedule_stage.h"
#include "pipeline/stages/similarity_stage.h"
#include "pipeline/stages/task_stage.h"

namespace kascade {
namespace {

// Hashes of a model, tokenizer and text as the loaders compute them (XXH3-64 hex); any fixed strings do.
const std::string kModelHash = "0c9b5a18d38a945f";
const std::string kTokenizerHash = "1d2e3f4a5b6c7d8e";
const std::string kTextHash = "9a8b7c6d5e4f3a2b";

TEST(PinnedContentKeys, ContentKeyIsXxh3OfTheCanonicalJson) {
    // content_key hashes {"format_version","inputs","params","stage"} dumped with sorted keys and no spaces: the
    // canonical text written by hand here, hashed with xxhash directly.
    const std::string canonical =
        R"({"format_version":2,"inputs":{"a":"x","b":1},"params":{"ctx":512},"stage":"capture"})";
    EXPECT_EQ(content_key("capture", 2, {{"b", 1}, {"a", "x"}}, {{"ctx", 512}}),
              fmt::format("{:016x}", XXH3_64bits(canonical.data(), canonical.size())));
}

TEST(PinnedContentKeys, CaptureSimilarityScheduleKeys) {
    CaptureParams capture;
    capture.token_offset = 0;
    capture.n_tokens = 8192;
    capture.ctx = 512;
    capture.tile = 16;
    const std::string capture_k = capture_key(kModelHash, kTokenizerHash, kTextHash, capture);
    EXPECT_EQ(capture_k, "60eab869fb97b2ab");

    TopKRule topk;
    topk.pct = 10;
    topk.k_min_tokens = 64;
    const std::string similarity_k = similarity_key(capture_k, topk, KeyGranularity::Token);
    EXPECT_EQ(similarity_k, "4e018a6db5fc0bfb");

    ScheduleParams dp;
    dp.policy = SchedulePolicy::Dp;
    dp.n_anchors = 2;
    EXPECT_EQ(schedule_key(similarity_k, dp), "dd17897a6cc88a4a");
    ScheduleParams threshold;
    threshold.policy = SchedulePolicy::Threshold;
    threshold.threshold = 0.8;
    EXPECT_EQ(schedule_key(similarity_k, threshold), "33a300b2f4ba0392");
}

TEST(PinnedContentKeys, EvalKeys) {
    const RunInputHashes kHashes{kModelHash, kTokenizerHash, kTextHash};
    ResolvedEval dense;
    dense.params.method = EvalMethod::Dense;
    dense.ctx = 512;
    dense.token_offset = 8192;
    dense.params.n_tokens = 2048;
    EXPECT_EQ(eval_key(dense, kHashes, ""), "7c33c35c4353baab");

    ResolvedEval kascade = dense;
    kascade.params.method = EvalMethod::Kascade;
    kascade.tile = 16;
    kascade.topk.pct = 10;
    kascade.topk.k_min_tokens = 64;
    EXPECT_EQ(eval_key(kascade, kHashes, "00112233aabbccdd"), "298a404f0e3f9191");

    ResolvedEval quest = dense;
    quest.params.method = EvalMethod::Quest;
    quest.params.phase = EvalPhase::Decode;
    quest.params.prompt_tokens = 256;
    quest.params.decode_tokens = 256;
    quest.topk.tiles = 4;
    quest.params.quest_page = 16;
    EXPECT_EQ(eval_key(quest, kHashes, ""), "d3b9e1b94bc8a7af");

    ResolvedEval omnikv = quest;
    omnikv.params.method = EvalMethod::OmniKv;
    omnikv.params.quest_page = 0;
    omnikv.tile = 16;
    omnikv.params.selection_layers = {2, 8, 18};
    EXPECT_EQ(eval_key(omnikv, kHashes, ""), "0328264d239512bc");

    ResolvedEval lessismore = omnikv;
    lessismore.params.method = EvalMethod::LessIsMore;
    lessismore.params.selection_layers = {2, 13};
    lessismore.params.window_ratio = 0.25;
    EXPECT_EQ(eval_key(lessismore, kHashes, ""), "f9d09d919878c9a5");
}

TEST(PinnedContentKeys, TaskKeys) {
    TaskKeyInputs dense;
    dense.model_hash = kModelHash;
    dense.tokenizer_hash = kTokenizerHash;
    dense.task = TaskKind::Passkey;
    dense.seed = 1;
    dense.max_new_tokens = 8;
    dense.prefill = TaskPrefill::Dense;
    EXPECT_EQ(task_key(dense), "aeaa2783a08ab1a5");

    TaskKeyInputs streaming = dense;
    streaming.method_key.method = EvalMethod::Streaming;
    streaming.prefill = TaskPrefill::Sparse;
    streaming.method_key.tile = 16;
    streaming.method_key.topk.pct = 25;
    streaming.method_key.topk.k_min_tokens = 32;
    streaming.haystack_hash = kTextHash;
    EXPECT_EQ(task_key(streaming), "f60842519e998380");

    // BF16 products name their numerics (exact ones, the default, add nothing: the literals above).
    TaskKeyInputs bf16 = dense;
    bf16.method_key.matmul = MatmulPrecision::Bf16;
    const nlohmann::json inputs = {{"model", kModelHash}, {"tokenizer", kTokenizerHash}, {"haystack", "filler"}};
    const nlohmann::json params = {{"task", "passkey"},  {"seed", 1},         {"max_new_tokens", 8},
                                   {"prefill", "dense"}, {"method", "dense"}, {"matmul", "bf16"}};
    EXPECT_EQ(task_key(bf16), content_key("task", kTaskFormatVersion, inputs, params));

    // So does a BF16 KV cache (an fp32 one, the default, adds nothing).
    TaskKeyInputs bf16_kv = dense;
    bf16_kv.method_key.kv_dtype = KvDType::BF16;
    nlohmann::json kv_params = params;
    kv_params.erase("matmul");
    kv_params["kv_dtype"] = "bf16";
    EXPECT_EQ(task_key(bf16_kv), content_key("task", kTaskFormatVersion, inputs, kv_params));
}

TEST(PinnedContentKeys, DatasetTaskKeys) {
    DatasetKeyInputs dense;
    dense.model_hash = kModelHash;
    dense.tokenizer_hash = kTokenizerHash;
    dense.dataset_hash = kTextHash;
    dense.prompt_template = "{context}\n{input}";
    dense.dataset_name = "qasper";
    dense.max_length = 31500;
    dense.max_new_tokens = 128;
    dense.chat_template = ChatTemplate::Llama31;
    dense.prefill = TaskPrefill::Dense;
    EXPECT_EQ(dataset_task_key(dense), "28af1d08db476e2f");
    DatasetKeyInputs f32_kv = dense;
    f32_kv.method_key.kv_dtype = KvDType::F32;
    EXPECT_EQ(dataset_task_key(f32_kv), "28af1d08db476e2f");
    DatasetKeyInputs bf16_kv = dense;
    bf16_kv.method_key.kv_dtype = KvDType::BF16;
    EXPECT_NE(dataset_task_key(bf16_kv), "28af1d08db476e2f");

    DatasetKeyInputs kascade = dense;
    kascade.dataset_name = "trec";
    kascade.metric = LongBenchMetric::Classification;
    kascade.chat_template = ChatTemplate::None;
    kascade.prefill = TaskPrefill::Sparse;
    kascade.method_key.method = EvalMethod::Kascade;
    kascade.method_key.tile = 32;
    kascade.method_key.topk.pct = 10;
    kascade.method_key.topk.k_rule = KRule::Rolling;
    kascade.method_key.schedule_key = "00112233aabbccdd";
    EXPECT_EQ(dataset_task_key(kascade), "2e918f4532d2d24c");
}

}  // namespace
}  // namespace kascade
