// kascade generate: sample text from a model (greedy or temperature/top-p), token by token with a KV cache.
#include <omp.h>

#include <cstdio>
#include <vector>

#include "base/error.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/runtime/sampler.h"
#include "pipeline/runtime/sequence_start.h"
#include "pipeline/runtime/transformer.h"

namespace kascade::cli {

namespace {
struct GenerateArgs {
    ModelArgs model;
    std::string prompt;
    int steps = 256;
    bool greedy = false;
    SamplerOptions sampler{.temperature = 1.0f, .top_p = 0.9f, .seed = 42};
};

void run_generate(const GenerateArgs& args) {
    KASCADE_CHECK(args.steps > 0, "invalid -n {} (must be > 0)", args.steps);
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
    const std::vector<int32_t> prompt = tokenizer->encode(args.prompt);
    sequence.insert(sequence.end(), prompt.begin(), prompt.end());
    KASCADE_CHECK(!sequence.empty(), "nothing to start from: the sequence starts without BOS and the prompt is empty");
    const int max_positions = static_cast<int>(sequence.size()) + args.steps;
    KASCADE_CHECK(
        max_positions <= c.max_seq_len,
        "prompt ({} tokens) + -n {} = {} positions exceeds the model's context of {} (max_position_embeddings)",
        sequence.size(), args.steps, max_positions, c.max_seq_len);

    SamplerOptions sampler_options = args.sampler;
    if (args.greedy) sampler_options.temperature = 0;
    Sampler sampler(sampler_options);
    Transformer model(weights, 0, args.model.matmul_precision());
    DenseAttention attention;
    KvCache cache(c, max_positions);
    std::vector<float> hidden(static_cast<size_t>(max_positions) * c.dim);
    std::vector<float> logits(c.vocab_size);

    for (size_t i = 0; i < sequence.size(); ++i) {
        std::fputs(tokenizer->decode_piece(i == 0 ? -1 : sequence[i - 1], sequence[i]).c_str(), stdout);
    }
    const double start = omp_get_wtime();
    // Prefill the prompt in one pass, then decode one token at a time.
    model.forward(sequence, cache, attention, hidden.data());
    model.lm_head(hidden.data() + (sequence.size() - 1) * c.dim, 1, logits.data());
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
        model.forward(std::span<const int32_t>(&token, 1), cache, attention, hidden.data());
        model.lm_head(hidden.data(), 1, logits.data());
    }
    std::fputs("\n", stdout);
    const double seconds = omp_get_wtime() - start;
    std::fprintf(stderr, "kascade: generated %d tokens in %.3f s (%.1f tokens/s)\n", generated, seconds,
                 seconds > 0 ? generated / seconds : 0.0);
}
}  // namespace

void register_generate_command(CLI::App& app) {
    auto args = std::make_shared<GenerateArgs>();
    CLI::App* cmd = app.add_subcommand("generate", "Generate text from a model (dense attention)");
    cmd->footer(
        "Examples:\n"
        "  kascade generate --model models/stories260K/stories260K.bin --tokenizer models/stories260K/tok512.bin "
        "-n 256 --greedy\n"
        "  kascade generate --model models/stories260K-hf --prompt \"Once upon a time\" -n 128 --temperature 0.8");
    args->model.add_to(*cmd);
    args->model.add_runtime_options_to(*cmd);
    cmd->add_option("--prompt,-p", args->prompt, "text to continue (default: start from BOS)");
    cmd->add_option("-n,--steps", args->steps, "tokens to generate after BOS and the prompt")->capture_default_str();
    cmd->add_flag("--greedy", args->greedy, "always take the most likely token (same as --temperature 0)");
    cmd->add_option("--temperature", args->sampler.temperature, "sampling temperature (0: greedy)")
        ->capture_default_str();
    cmd->add_option("--top-p", args->sampler.top_p, "nucleus sampling mass in (0, 1]")->capture_default_str();
    cmd->add_option("--seed", args->sampler.seed, "random seed for sampling")->capture_default_str();
    cmd->callback([args] { run_generate(*args); });
}

}  // namespace kascade::cli
