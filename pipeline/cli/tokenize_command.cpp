// kascade tokenize: print the token ids of a text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/text_file.h"
#include "io/tokenizer/tokenizer.h"
#include "pipeline/cli/commands.h"

namespace kascade::cli {

namespace {
struct TokenizeArgs {
    std::string tokenizer;
    std::string text_file;
    std::string text;
    bool json = false;
};
}  // namespace

void register_tokenize_command(CLI::App& app) {
    auto args = std::make_shared<TokenizeArgs>();
    CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
    cmd->footer(
        "Examples:\n"
        "  kascade tokenize --tokenizer models/stories260K/tok512.bin --string \"Once upon a time\"\n"
        "  kascade tokenize --tokenizer models/smollm2-135m-tokenizer/tokenizer.json --text story.txt --json");
    cmd->add_option("--tokenizer,-t", args->tokenizer,
                    "tokenizer.json, tokenizer.model (tiktoken or SentencePiece), llama2.c tokenizer.bin or a .gguf "
                    "model (its embedded tokenizer)")
        ->required();
    auto* text_file = cmd->add_option("--text", args->text_file, "text file to tokenize");
    auto* text = cmd->add_option("--string,-s", args->text, "text to tokenize");
    text_file->excludes(text);
    cmd->add_flag("--json", args->json, "print {\"tokens\": [...], \"count\": N} instead of one id per line");
    cmd->callback([args, text_file, text] {
        KASCADE_USAGE_CHECK(text_file->count() + text->count() == 1, "tokenize needs --text FILE or --string S");
        const auto tokenizer = load_tokenizer(args->tokenizer);
        const std::string input = text_file->count() ? read_text_file(args->text_file) : args->text;
        const std::vector<int32_t> ids = tokenizer->encode(input);
        if (args->json) {
            nlohmann::json out = {{"tokens", ids}, {"count", ids.size()}};
            std::printf("%s\n", out.dump().c_str());
        } else {
            for (int32_t id : ids) std::printf("%d\n", id);
        }
    });
}

}  // namespace kascade::cli
