// tests/pipeline/test_eval_stage.cpp: the eval stage's pure pieces in-process: the method and phase names, the
// content key (prefill keys are those of the runs stored before decode runs existed, so stored runs stay cache
// hits), how test tokens are cut into decode windows, and what a decode window scores (against dense prefills).
#include <gtest/gtest.h>

#include <filesystem>

#include "base/error.h"
#include "common/error_of.h"
#include "io/weights/model_weights.h"
#include "pipeline/runtime/decode_perplexity.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/content_key.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/similarity_stage.h"

namespace kascade {
namespace {

using test::error_of;

TEST(EvalMethod, EveryMethodAndPhaseHasOneName) {
    for (EvalMethod m : {EvalMethod::Dense, EvalMethod::Kascade, EvalMethod::Oracle, EvalMethod::Streaming,
                         EvalMethod::Quest, EvalMethod::OmniKv, EvalMethod::LessIsMore})
        EXPECT_EQ(parse_mode<EvalMethod>(mode_name(m), "--method"), m);
    EXPECT_EQ(mode_names<EvalMethod>(),
              (std::vector<std::string>{"dense", "kascade", "oracle", "streaming", "quest", "omnikv", "lessismore"}));
    EXPECT_EQ(parse_mode<EvalPhase>("decode", "--phase"), EvalPhase::Decode);
    EXPECT_EQ(error_of([] { parse_mode<EvalMethod>("Oracle", "--method"); }),
              "invalid --method='Oracle' (expected dense, kascade, oracle, streaming, quest, omnikv, lessismore); did "
              "you mean oracle?");
    EXPECT_EQ(error_of([] { parse_mode<EvalPhase>("generate", "test.phase"); }),
              "invalid test.phase='generate' (expected prefill, decode)");
}

const RunInputHashes kHashes{"m", "t", "x"};

ResolvedEval oracle_inputs() {
    ResolvedEval r;
    r.params.method = EvalMethod::Oracle;
    r.ctx = 512;
    r.token_offset = 8687;
    r.params.n_tokens = 8192;
    r.tile = 16;
    r.topk = TopKRule{4, 0, 0, KRule::Visible, 0};
    return r;
}

/// The documented parts of oracle_inputs()'s key: the inputs, and its parameters as kascade wrote them before phases
/// and --matmul existed.
const nlohmann::json kHashInputs = {{"model", "m"}, {"tokenizer", "t"}, {"text", "x"}};
const nlohmann::json kOraclePrefillParams = {{"method", "oracle"},
                                             {"ctx", 512},
                                             {"token_offset", 8687},
                                             {"n_tokens", 8192},
                                             {"tile", 16},
                                             {"topk", {{"topk_tiles", 4}, {"round_k", 0}}},
                                             {"key_granularity", "token"},
                                             {"pooling", "post_softmax"}};

std::string key_of(const ResolvedEval& r) {
    return eval_key(r, kHashes, "");
}

TEST(EvalKey, PrefillKeysAreThoseOfRunsStoredBeforeDecodeRuns) {
    // The key as kascade wrote it before phases existed, built here from its documented parts.
    EXPECT_EQ(key_of(oracle_inputs()), content_key("eval", kEvalFormatVersion, kHashInputs, kOraclePrefillParams));
    // Decode settings do not enter a prefill key.
    ResolvedEval with_counts = oracle_inputs();
    with_counts.params.prompt_tokens = 100;
    with_counts.params.decode_tokens = 7;
    with_counts.params.quest_page = 8;
    EXPECT_EQ(key_of(with_counts), key_of(oracle_inputs()));
}

TEST(EvalKey, Bf16ProductsAddTheirNumericsAndExactOnesNothing) {
    // Exact products are the default: their keys are those written before --matmul existed (above); BF16 ones name
    // the numerics, built here from the documented parts.
    ResolvedEval bf16 = oracle_inputs();
    bf16.params.matmul = MatmulPrecision::Bf16;
    nlohmann::json params = kOraclePrefillParams;
    params["matmul"] = "bf16";
    EXPECT_EQ(key_of(bf16), content_key("eval", kEvalFormatVersion, kHashInputs, params));
}

TEST(EvalKey, ABf16KvCacheAddsItsDtypeAndAnF32OneNothing) {
    // An fp32 cache is the default: its keys are those written before --kv-dtype existed; a BF16 cache names its
    // dtype, beside the products' numerics when they are bf16 too.
    ResolvedEval f32 = oracle_inputs();
    f32.params.kv_dtype = KvDType::F32;
    EXPECT_EQ(key_of(f32), content_key("eval", kEvalFormatVersion, kHashInputs, kOraclePrefillParams));
    ResolvedEval bf16 = oracle_inputs();
    bf16.params.kv_dtype = KvDType::BF16;
    nlohmann::json params = kOraclePrefillParams;
    params["kv_dtype"] = "bf16";
    EXPECT_EQ(key_of(bf16), content_key("eval", kEvalFormatVersion, kHashInputs, params));
    bf16.params.matmul = MatmulPrecision::Bf16;
    params["matmul"] = "bf16";
    EXPECT_EQ(key_of(bf16), content_key("eval", kEvalFormatVersion, kHashInputs, params));
}

TEST(EvalKey, DecodeKeysDependOnPhaseAndCounts) {
    ResolvedEval decode = oracle_inputs();
    decode.params.phase = EvalPhase::Decode;
    decode.params.prompt_tokens = 256;
    decode.params.decode_tokens = 256;
    EXPECT_NE(key_of(decode), key_of(oracle_inputs()));
    ResolvedEval longer = decode;
    longer.params.decode_tokens = 128;
    EXPECT_NE(key_of(longer), key_of(decode));
    ResolvedEval quest = decode;
    quest.params.method = EvalMethod::Quest;
    quest.params.quest_page = 16;
    ResolvedEval other_page = quest;
    other_page.params.quest_page = 32;
    EXPECT_NE(key_of(quest), key_of(other_page));
    // Quest has no tile: the tile does not change its key.
    ResolvedEval other_tile = quest;
    other_tile.tile = 32;
    EXPECT_EQ(key_of(other_tile), key_of(quest));
}

TEST(EvalKey, OmniKvAndLessIsMoreKeysNameTheirLayersAndOnlyThem) {
    ResolvedEval decode = oracle_inputs();
    decode.params.phase = EvalPhase::Decode;
    decode.params.prompt_tokens = 256;
    decode.params.decode_tokens = 256;
    // The other methods' keys do not see the layer lists or the ratio.
    ResolvedEval oracle_with_layers = decode;
    oracle_with_layers.params.selection_layers = {2, 8};
    oracle_with_layers.params.window_ratio = 0.5;
    EXPECT_EQ(key_of(oracle_with_layers), key_of(decode));

    ResolvedEval omnikv = decode;
    omnikv.params.method = EvalMethod::OmniKv;
    omnikv.params.selection_layers = {2};
    nlohmann::json params = {{"method", "omnikv"},
                             {"ctx", 512},
                             {"token_offset", 8687},
                             {"n_tokens", 8192},
                             {"phase", "decode"},
                             {"prompt_tokens", 256},
                             {"decode_tokens", 256},
                             {"tile", 16},
                             {"filter_layers", nlohmann::json::array({2})},
                             {"topk", {{"topk_tiles", 4}, {"round_k", 0}}}};
    EXPECT_EQ(key_of(omnikv), content_key("eval", kEvalFormatVersion, kHashInputs, params));
    ResolvedEval omnikv_granularity = omnikv;  // no key granularity, pooling or window ratio
    omnikv_granularity.granularity = KeyGranularity::Tile;
    omnikv_granularity.pooling = Pooling::PreSoftmax;
    omnikv_granularity.params.window_ratio = 0.5;
    EXPECT_EQ(key_of(omnikv_granularity), key_of(omnikv));
    ResolvedEval omnikv_layers = omnikv;
    omnikv_layers.params.selection_layers = {2, 4};
    EXPECT_NE(key_of(omnikv_layers), key_of(omnikv));

    ResolvedEval lessismore = omnikv;
    lessismore.params.method = EvalMethod::LessIsMore;
    lessismore.params.window_ratio = 0.25;
    params.erase("filter_layers");
    params["method"] = "lessismore";
    params["selection_layers"] = nlohmann::json::array({2});
    params["window_ratio"] = 0.25;
    params["sink_tokens"] = 4;
    EXPECT_EQ(key_of(lessismore), content_key("eval", kEvalFormatVersion, kHashInputs, params));
    ResolvedEval other_ratio = lessismore;
    other_ratio.params.window_ratio = 0.5;
    EXPECT_NE(key_of(other_ratio), key_of(lessismore));
    EXPECT_NE(key_of(lessismore), key_of(omnikv));
}

TEST(DecodeWindows, WholeWindowsOfPromptPlusDecodeTokens) {
    DecodeOptions o;
    o.prompt_tokens = 4;
    o.decode_tokens = 3;
    o.offset = 10;
    // With BOS: 7 positions = BOS + 6 text inputs, and the last decode position's target: 7 text tokens.
    EXPECT_EQ(decode_window_tokens(o, true), 7);
    const auto with_bos = make_decode_windows(30, o, true, 64);
    ASSERT_EQ(with_bos.size(), 2u);  // [10, 17), [17, 24); [24, 30) is not whole
    EXPECT_EQ(with_bos[1].begin, 17);
    EXPECT_EQ(with_bos[1].end, 24);
    // Without BOS the 7 positions are all text, and the last target is one more: 8 text tokens.
    const auto without_bos = make_decode_windows(30, o, false, 64);
    ASSERT_EQ(without_bos.size(), 2u);
    EXPECT_EQ(without_bos[1].end, 26);
    o.max_tokens = 6;
    EXPECT_EQ(error_of([&] { make_decode_windows(30, o, true, 64); }),
              "test tokens [10, 16) hold no whole decode window: prompt-tokens=4 + decode-tokens=3 needs 7 text "
              "tokens");
    o.max_tokens = 0;
    EXPECT_EQ(error_of([&] { make_decode_windows(30, o, true, 6); }),
              "prompt-tokens=4 + decode-tokens=3 is more than the model's context of 6 positions "
              "(max_position_embeddings)");
}

TEST(DecodePerplexity, DenseDecodeScoresWhatDensePrefillsScoreAtTheSamePositions) {
    // Prefill is causal, so a prefill of the prompt and the decoded tokens (plus the last target) minus a prefill of
    // the prompt (plus its next token) scores exactly the tokens the decode steps predict, at the same positions: an
    // independent check of the teacher-forcing indices, with and without BOS.
    const ModelWeights weights =
        load_model(std::filesystem::path(KASCADE_SHARED_DIR) / "models/stories260K/stories260K.bin");
    const Transformer model(weights);
    std::vector<int32_t> text(400);
    for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<int32_t>(3 + (i * 37 + i * i % 11) % 500);
    DenseAttention dense;
    for (const int32_t bos : {weights.config.bos_token_id, -1}) {
        DecodeOptions o;
        o.prompt_tokens = 101;
        o.decode_tokens = 50;
        o.offset = 7;
        o.max_tokens = decode_window_tokens(o, bos >= 0);
        const PerplexityResult decoded = evaluate_decode_perplexity(model, dense, text, bos, o);
        ASSERT_EQ(decoded.n_scored, 50);
        ASSERT_EQ(decoded.n_windows, 1);
        const int with_targets = o.prompt_tokens + o.decode_tokens + 1, prompt_and_next = o.prompt_tokens + 1;
        const PerplexityResult all = evaluate_perplexity(
            model, dense, text, bos, {.ctx = with_targets, .offset = 7, .max_tokens = with_targets - (bos >= 0)});
        const PerplexityResult prompt = evaluate_perplexity(
            model, dense, text, bos, {.ctx = prompt_and_next, .offset = 7, .max_tokens = prompt_and_next - (bos >= 0)});
        ASSERT_EQ(all.n_scored - prompt.n_scored, 50);
        EXPECT_NEAR(decoded.nll_sum, all.nll_sum - prompt.nll_sum, 1e-5 * all.nll_sum) << "bos " << bos;
    }
}

}  // namespace
}  // namespace kascade
