// kascade perplexity: dense perplexity of a model on a text file.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/text_file.h"
#include "pipeline/cli/commands.h"
#include "pipeline/cli/model_args.h"
#include "pipeline/runtime/corpus_tokens.h"
#include "pipeline/runtime/perplexity.h"
#include "pipeline/runtime/progress.h"
#include "pipeline/runtime/sequence_start.h"

namespace kascade::cli {

namespace {
struct PerplexityArgs {
    ModelArgs model;
    std::string text;
    PerplexityOptions options;
    bool json = false;
};

void run_perplexity(const PerplexityArgs& args) {
    PerplexityOptions options = args.options;
    options.kv_dtype = args.model.kv_cache_dtype();  // checked before the model is read
    const ModelWeights weights = load_model(args.model.model, args.model.load_options());
    const auto tokenizer = load_tokenizer_for(args.model);
    const std::string text = read_text_file(args.text);
    const ModelConfig& c = weights.config;
    KASCADE_CHECK(
        tokenizer->vocab_size() <= c.vocab_size,
        "tokenizer \"{}\" has {} tokens but model \"{}\" only {} (vocab_size): they do not belong together",
        args.model.tokenizer.empty() ? find_tokenizer_for_model(args.model.model).string() : args.model.tokenizer,
        tokenizer->vocab_size(), args.model.model, c.vocab_size);
    const std::vector<int32_t> tokens = tokenize_corpus(*tokenizer, text, document_boundary_token(c, tokenizer.get()));
    const int32_t start = sequence_start_token(c, tokenizer.get());
    Transformer model(weights, 0, args.model.matmul_precision());
    // Fail before any work if the windows cannot be made (ctx too large, offset past the end, ...).
    const auto windows = make_windows(static_cast<int64_t>(tokens.size()), options, start >= 0, model.max_positions());
    DenseAttention attention;
    ProgressLine progress("perplexity", static_cast<int64_t>(windows.size()), "windows");
    const PerplexityResult r = evaluate_perplexity(model, attention, tokens, start, options,
                                                   [&](int done, const PerplexityResult&) { progress.update(done); });
    progress.finish();
    if (args.json) {
        nlohmann::json out = {{"model", args.model.model},
                              {"text", args.text},
                              {"ctx", options.ctx},
                              {"offset", options.offset},
                              {"windows", r.n_windows},
                              {"weights_dtype", args.model.weights_dtype},
                              {"matmul", args.model.matmul},
                              {"kv_dtype", args.model.kv_dtype},
                              {"tokens", r.n_scored},
                              {"nll", r.mean_nll()},
                              {"ppl", r.perplexity()},
                              {"seconds", r.seconds},
                              {"tokens_per_s", r.tokens_per_second()},
                              {"attention_ms", r.stats.attention_ms},
                              {"matmul_ms", r.stats.matmul_ms}};
        std::printf("%s\n", out.dump(2).c_str());
    } else {
        std::printf("perplexity %.6f  (mean NLL %.6f nats over %lld tokens, %d windows of ctx %d)\n", r.perplexity(),
                    r.mean_nll(), static_cast<long long>(r.n_scored), r.n_windows, options.ctx);
        std::printf("%.1f tokens/s  (%.3f s: matmul %.0f ms, attention %.0f ms, other %.0f ms)\n",
                    r.tokens_per_second(), r.seconds, r.stats.matmul_ms, r.stats.attention_ms, r.stats.other_ms());
    }
}
}  // namespace

void register_perplexity_command(CLI::App& app) {
    auto args = std::make_shared<PerplexityArgs>();
    CLI::App* cmd = app.add_subcommand("perplexity", "Dense perplexity of a model on a text file");
    cmd->footer(
        "Scores non-overlapping windows of --ctx positions (BOS + ctx-1 text tokens where the model has BOS and\n"
        "the tokenizer_config.json beside a tokenizer.json does not set add_bos_token to false).\n"
        "Examples:\n"
        "  kascade perplexity --model models/stories260K/stories260K.bin --text wiki.test.raw --ctx 512 "
        "--max-tokens 16384\n"
        "  kascade perplexity --model models/stories260K-hf --tokenizer models/stories260K/tok512.bin "
        "--text stories.txt --json");
    args->model.add_to(*cmd);
    args->model.add_runtime_options_to(*cmd);
    cmd->add_option("--text", args->text, "text file to score")->required();
    cmd->add_option("--ctx", args->options.ctx, "positions per window (BOS included)")->capture_default_str();
    cmd->add_option("--max-tokens", args->options.max_tokens, "text tokens to score (0: all)")->capture_default_str();
    cmd->add_option("--offset", args->options.offset, "first text token to use")->capture_default_str();
    cmd->add_flag("--json", args->json, "print one JSON object with tokens, nll (nats), ppl and the numerics");
    cmd->callback([args] { run_perplexity(*args); });
}

}  // namespace kascade::cli
