// kascade generate: sample text from a model (greedy or temperature/top-p), token by token with a KV cache; the
// prompt is prefilled densely and every generated token decodes through the chosen attention method.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/text_file.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/method_options.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/runtime/batched_decode.h"
#include "pipeline/runtime/sampler.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/workspace.h"

namespace kascade::cli {

namespace {
struct GenerateArgs {
    ModelArgs model;
    std::vector<std::string> prompts;
    std::vector<std::string> prompt_files;
    int batch = 0;  ///< sequences decoded together; 0: one per prompt given
    int steps = 256;
    bool greedy = false;
    SamplerOptions sampler{.temperature = 1.0f, .top_p = 0.9f, .seed = 42};
    MethodOptions method;
};

/// The decode method's settings: dense, a stored schedule (read from the results folder) or a baseline.
ResolvedEval resolve_generate_method(const GenerateArgs& args, const std::string& results_dir, int max_positions) {
    EvalParams p;
    p.phase = EvalPhase::Decode;
    args.method.apply_to(p, "generate");
    if (p.method == EvalMethod::Kascade) {
        ResultsDb db(results_dir, DbAccess::ReadOnly);
        return resolve_method(&db, model_content_hash(args.model.model), args.model.model, p, max_positions,
                              "prompt + -n");
    }
    return resolve_method(nullptr, "", args.model.model, p, max_positions, "prompt + -n");
}

/// One sequence of a (batched) generation: its tokens so far, cache, decode policy and sampler.
struct Generation {
    std::vector<int32_t> tokens;
    size_t prompt_tokens = 0;
    std::unique_ptr<KvCache> cache;
    std::unique_ptr<AttentionPolicy> decode;
    Sampler sampler;
    std::vector<float> logits;
    std::string text;  ///< what was generated (printed at the end when several sequences run)
};

/// The prompts of the sequences: --prompt / --prompt-file as given (one sequence each), repeated in turn up to
/// --batch sequences; none gives one sequence from BOS alone.
std::vector<std::string> prompts_of(const GenerateArgs& args) {
    std::vector<std::string> given = args.prompts;
    for (const std::string& file : args.prompt_files) given.push_back(read_text_file(file));
    if (given.empty()) given.push_back("");
    const size_t n = args.batch > 0 ? static_cast<size_t>(args.batch) : given.size();
    std::vector<std::string> prompts;
    for (size_t i = 0; i < n; ++i) prompts.push_back(given[i % given.size()]);
    return prompts;
}

void run_generate(const GenerateArgs& args, const std::string& results_dir) {
    const KvDType kv_dtype = args.model.kv_cache_dtype();  // checked before the model is read
    const ModelWeights weights = load_model(args.model.model, args.model.load_options());
    const auto tokenizer = load_tokenizer_for(args.model);
    const ModelConfig& c = weights.config;
    KASCADE_CHECK(tokenizer->vocab_size() <= c.vocab_size,
                  "tokenizer has {} tokens but model \"{}\" only {} (vocab_size): they do not belong together",
                  tokenizer->vocab_size(), args.model.model, c.vocab_size);

    // Each sequence starts with BOS (see sequence_start_token()) and its prompt; -n more tokens are generated after
    // it. From BOS alone this is exactly llama2.c's `steps`, so `-n 256` reproduces its published output.
    const int32_t start = sequence_start_token(c, tokenizer.get());
    std::vector<std::vector<int32_t>> starts;
    size_t longest = 0;
    for (const std::string& prompt : prompts_of(args)) {
        std::vector<int32_t> sequence;
        if (start >= 0) sequence.push_back(start);
        const std::vector<int32_t> ids = tokenizer->encode(prompt);
        sequence.insert(sequence.end(), ids.begin(), ids.end());
        KASCADE_CHECK(!sequence.empty(),
                      "nothing to start from: the sequence starts without BOS and the prompt is empty");
        longest = std::max(longest, sequence.size());
        starts.push_back(std::move(sequence));
    }
    // In 64 bits: -n may be anything up to INT_MAX, and the sum must not wrap around past this check.
    const int64_t positions = static_cast<int64_t>(longest) + args.steps;
    KASCADE_CHECK(
        positions <= c.max_seq_len,
        "prompt ({} tokens) + -n {} = {} positions exceeds the model's context of {} (max_position_embeddings)",
        longest, args.steps, positions, c.max_seq_len);
    const int max_positions = static_cast<int>(positions);

    const ResolvedEval method = resolve_generate_method(args, results_dir, max_positions);
    check_method_layers(method.params, c.n_layers);

    SamplerOptions sampler_options = args.sampler;
    if (args.greedy) sampler_options.temperature = 0;
    Transformer model(weights, 0, args.model.matmul_precision());
    DenseAttention prefill;
    const bool batched = starts.size() > 1;
    std::vector<Generation> runs;
    for (size_t i = 0; i < starts.size(); ++i) {
        SamplerOptions own = sampler_options;
        own.seed += i;  // sequence i samples with seed + i
        std::unique_ptr<AttentionPolicy> decode = make_method_policy(method, c.n_layers);
        const int page_size = decode->kv_page_size();
        runs.push_back({std::move(starts[i]),
                        0,
                        std::make_unique<KvCache>(c, max_positions, page_size, kv_dtype),
                        std::move(decode),
                        Sampler(own),
                        std::vector<float>(c.vocab_size),
                        {}});
    }
    std::vector<float> hidden(longest * c.dim);  // the rows of the longest prompt's prefill

    if (!batched) {
        const std::vector<int32_t>& s = runs[0].tokens;
        for (size_t i = 0; i < s.size(); ++i)
            std::fputs(tokenizer->decode_piece(i == 0 ? -1 : s[i - 1], s[i]).c_str(), stdout);
    }
    // Prefill each prompt densely in one pass, then decode one token per sequence per step through the method, the
    // sequences still generating in one batched forward pass.
    const double prefill_start = omp_get_wtime();
    size_t prompt_tokens = 0;
    for (Generation& g : runs) {
        model.forward(g.tokens, *g.cache, prefill, hidden.data());
        model.lm_head(hidden.data() + (g.tokens.size() - 1) * c.dim, 1, g.logits.data());
        g.prompt_tokens = g.tokens.size();
        prompt_tokens += g.tokens.size();
    }
    const double prefill_seconds = omp_get_wtime() - prefill_start;
    const double decode_start = omp_get_wtime();
    int generated = 0;
    std::vector<DecodingSequence> decoding;
    for (Generation& g : runs) decoding.push_back({g.cache.get(), g.decode.get(), g.logits.data()});
    const std::vector<DecodeTally> tallies = decode_batched(model, decoding, [&](size_t i) -> std::optional<int32_t> {
        Generation& g = runs[i];
        const int32_t next = g.sampler.sample(g.logits.data(), c.vocab_size);
        // llama2.c models emit BOS between stories
        if (next == c.eos_token_id || next == c.bos_token_id) return std::nullopt;
        const std::string piece = tokenizer->decode_piece(g.tokens.back(), next);
        if (batched) {
            g.text += piece;
        } else {
            std::fputs(piece.c_str(), stdout);
            std::fflush(stdout);
        }
        g.tokens.push_back(next);
        ++generated;
        if (g.tokens.size() - g.prompt_tokens == static_cast<size_t>(args.steps)) return std::nullopt;
        return next;
    });
    int decoded = 0;
    for (const DecodeTally& t : tallies) decoded += t.steps;
    const double seconds = omp_get_wtime() - decode_start;
    if (batched) {
        for (size_t i = 0; i < runs.size(); ++i) {
            std::printf("--- sequence %zu (%zu prompt tokens) ---\n%s\n", i + 1, runs[i].prompt_tokens,
                        runs[i].text.c_str());
        }
    } else {
        std::fputs("\n", stdout);
    }
    std::fflush(stdout);  // the text before the summary line, where both go to one terminal
    // Each sequence's first token comes from its prefill; the others from decode steps, which is what is timed.
    LayerDensity density;
    for (const Generation& g : runs)
        for (const LayerDensity& d : g.decode->layer_density()) density.add(d);
    std::fprintf(stderr,
                 "kascade: prefilled %zu prompt tokens in %.3f s (%.1f prefill tokens/s); generated %d tokens, %d "
                 "decode steps in %.3f s (%.1f decode tokens/s; %s, key density %.4f; %zu sequence%s)\n",
                 prompt_tokens, prefill_seconds, prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0, generated,
                 decoded, seconds, seconds > 0 ? decoded / seconds : 0.0,
                 std::string(mode_name(method.params.method)).c_str(), density.ratio(), runs.size(),
                 batched ? "s" : "");
}
}  // namespace

void register_generate_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<GenerateArgs>();
    CLI::App* cmd = app.add_subcommand("generate", "Generate text from a model (dense or sparse decode attention)");
    cmd->footer(
        "Examples:\n"
        "  kascade generate --model models/stories260K/stories260K.bin --tokenizer models/stories260K/tok512.bin "
        "-n 256 --greedy\n"
        "  kascade generate --model models/stories260K-hf --prompt \"Once upon a time\" -n 128 --temperature 0.8\n"
        "  kascade generate --model tests/fixtures/retrieval-model --prompt-file passkey-prompt.txt -n 8 --greedy\n"
        "  kascade generate --model models/stories260K/stories260K.bin -p \"Once upon a time\" -p \"The cat\" --batch "
        "8 "
        "-n 128 --kv-dtype bf16\n"
        "  kascade generate --model models/stories260K/stories260K.bin --results results --schedule 3 -n 256 --greedy\n"
        "  kascade generate --model models/stories260K/stories260K.bin --method quest --topk-pct 10 --k-min 32 -n 256\n"
        "  kascade generate --model models/stories260K/stories260K.bin --method lessismore --selection-layers 2 "
        "--topk-tiles 4 -n 256 --greedy");
    args->model.add_to(*cmd);
    args->model.add_runtime_options_to(*cmd);
    cmd->add_option("--prompt,-p", args->prompts,
                    "text to continue (default: start from BOS); repeat for several sequences");
    cmd->add_option("--prompt-file", args->prompt_files,
                    "a file whose text to continue (long prompts); repeat for several sequences");
    check_range(cmd->add_option("--batch", args->batch,
                                "sequences decoded together, one batched forward pass per step (the prompts given are "
                                "used in turn; default: one sequence per prompt)"),
                param_range::kBatch, "--batch");
    check_range(cmd->add_option("-n,--steps", args->steps, "tokens to generate after BOS and the prompt")
                    ->capture_default_str(),
                ValueRange{1, std::numeric_limits<int>::max()}, "-n");
    cmd->add_flag("--greedy", args->greedy, "always take the most likely token (same as --temperature 0)");
    cmd->add_option("--temperature", args->sampler.temperature, "sampling temperature (0: greedy)")
        ->capture_default_str();
    cmd->add_option("--top-p", args->sampler.top_p, "nucleus sampling mass in (0, 1]")->capture_default_str();
    cmd->add_option("--seed", args->sampler.seed, "random seed for sampling")->capture_default_str();
    args->method.add_to(*cmd, EvalMethod::Dense);
    cmd->callback([args, &common] { run_generate(*args, common.results_dir); });
}

}  // namespace kascade::cli
