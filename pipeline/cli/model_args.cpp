#include "pipeline/cli/model_args.h"

#include "io/error.h"

namespace kascade::cli {

void ModelArgs::add_to(CLI::App& command, bool model_required) {
    auto* opt = command.add_option("--model,-m", model,
                                   "llama2.c checkpoint (.bin), Hugging Face model directory, or .safetensors file");
    if (model_required) opt->required();
    command.add_option("--tokenizer,-t", tokenizer,
                       "tokenizer.json or llama2.c tokenizer.bin (default: the one next to the model)");
}

std::unique_ptr<Tokenizer> load_tokenizer_for(const ModelArgs& args) {
    if (!args.tokenizer.empty()) return load_tokenizer(args.tokenizer);
    const std::filesystem::path found = find_tokenizer_for_model(args.model);
    KASCADE_CHECK(!found.empty(),
                  "no tokenizer found next to model \"{}\" (looked for tokenizer.json, tokenizer*.bin, tok*.bin); "
                  "pass one with --tokenizer",
                  args.model);
    return load_tokenizer(found);
}

}  // namespace kascade::cli
