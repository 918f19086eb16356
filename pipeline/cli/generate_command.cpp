// kascade generate: sample text from a model (greedy or temperature/top-p), token by token with a KV cache; the
// prompt is prefilled densely and every generated token decodes through the chosen attention method.
#include <omp.h>

#include <cstdio>
#include <vector>

#include "base/error.h"
#include "io/text_file.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/method_options.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/runtime/sampler.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"
#include "pipeline/stages/eval_stage.h"
#include "pipeline/stages/workspace.h"

namespace kascade::cli {

namespace {
struct GenerateArgs {
    ModelArgs model;
    std::string prompt;
    std::string prompt_file;
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

void run_generate(const GenerateArgs& args, const std::string& results_dir) {
    const ModelWeights weights = load_model(args.model.model, args.model.load_options());
    const auto tokenizer = load_tokenizer_for(args.model);
    const ModelConfig& c = weights.config;
    KASCADE_CHECK(tokenizer->vocab_size() <= c.vocab_size,
                  "tokenizer has {} tokens but model \"{}\" only {} (vocab_size): they do not belong together",
                  tokenizer->vocab_size(), args.model.model, c.vocab_size);

    // The sequence starts with BOS (see sequence_start_token()) and the prompt; -n more tokens are generated after
    // it. From BOS alone this is exactly llama2.c's `steps`, so `-n 256` reproduces its published output.
    std::vector<int32_t> sequence;
    if (const int32_t start = sequence_start_token(c, tokenizer.get()); start >= 0) sequence.push_back(start);
    const std::vector<int32_t> prompt =
        tokenizer->encode(args.prompt_file.empty() ? args.prompt : read_text_file(args.prompt_file));
    sequence.insert(sequence.end(), prompt.begin(), prompt.end());
    KASCADE_CHECK(!sequence.empty(), "nothing to start from: the sequence starts without BOS and the prompt is empty");
    // In 64 bits: -n may be anything up to INT_MAX, and the sum must not wrap around past this check.
    const int64_t positions = static_cast<int64_t>(sequence.size()) + args.steps;
    KASCADE_CHECK(
        positions <= c.max_seq_len,
        "prompt ({} tokens) + -n {} = {} positions exceeds the model's context of {} (max_position_embeddings)",
        sequence.size(), args.steps, positions, c.max_seq_len);
    const int max_positions = static_cast<int>(positions);

    const ResolvedEval method = resolve_generate_method(args, results_dir, max_positions);
    check_method_layers(method.params, c.n_layers);
    MethodPolicy decode = make_method_policy(method, c.n_layers);

    SamplerOptions sampler_options = args.sampler;
    if (args.greedy) sampler_options.temperature = 0;
    Sampler sampler(sampler_options);
    Transformer model(weights, 0, args.model.matmul_precision());
    DenseAttention prefill;
    KvCache cache(c, max_positions, decode.policy->kv_page_size());
    std::vector<float> hidden(static_cast<size_t>(max_positions) * c.dim);
    std::vector<float> logits(c.vocab_size);

    for (size_t i = 0; i < sequence.size(); ++i) {
        std::fputs(tokenizer->decode_piece(i == 0 ? -1 : sequence[i - 1], sequence[i]).c_str(), stdout);
    }
    // Prefill the prompt densely in one pass, then decode one token at a time through the method.
    const double prefill_start = omp_get_wtime();
    model.forward(sequence, cache, prefill, hidden.data());
    model.lm_head(hidden.data() + (sequence.size() - 1) * c.dim, 1, logits.data());
    const double prefill_seconds = omp_get_wtime() - prefill_start;
    const size_t prompt_tokens = sequence.size();
    const double start = omp_get_wtime();
    int generated = 0;
    while (generated < args.steps) {
        const int32_t next = sampler.sample(logits.data(), c.vocab_size);
        if (next == c.eos_token_id || next == c.bos_token_id) break;  // llama2.c models emit BOS between stories
        std::fputs(tokenizer->decode_piece(sequence.back(), next).c_str(), stdout);
        std::fflush(stdout);
        sequence.push_back(next);
        ++generated;
        if (generated == args.steps) break;
        const int32_t token = next;
        model.forward(std::span<const int32_t>(&token, 1), cache, *decode.policy, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data());
    }
    const double seconds = omp_get_wtime() - start;
    std::fputs("\n", stdout);
    std::fflush(stdout);  // the text before the summary line, where both go to one terminal
    // The first token comes from the prefill; the others from decode steps, which is what is timed.
    LayerDensity density;
    for (const LayerDensity& d : decode.layer_density()) density.add(d);
    std::fprintf(stderr,
                 "kascade: prefilled %zu prompt tokens in %.3f s (%.1f prefill tokens/s); generated %d tokens, %d "
                 "decode steps in %.3f s (%.1f decode tokens/s; %s, key density %.4f)\n",
                 prompt_tokens, prefill_seconds, prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0, generated,
                 std::max(generated - 1, 0), seconds, seconds > 0 ? std::max(generated - 1, 0) / seconds : 0.0,
                 std::string(mode_name(method.params.method)).c_str(), density.ratio());
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
        "  kascade generate --model models/stories260K/stories260K.bin --results results --schedule 3 -n 256 --greedy\n"
        "  kascade generate --model models/stories260K/stories260K.bin --method quest --topk-pct 10 --k-min 32 -n 256\n"
        "  kascade generate --model models/stories260K/stories260K.bin --method lessismore --selection-layers 2 "
        "--topk-tiles 4 -n 256 --greedy");
    args->model.add_to(*cmd);
    args->model.add_runtime_options_to(*cmd);
    auto* prompt = cmd->add_option("--prompt,-p", args->prompt, "text to continue (default: start from BOS)");
    cmd->add_option("--prompt-file", args->prompt_file, "a file whose text to continue (long prompts)")
        ->excludes(prompt);
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
