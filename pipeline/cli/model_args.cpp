#include "pipeline/cli/model_args.h"

#include "base/error.h"

namespace kascade::cli {

void ModelArgs::add_to(CLI::App& command, bool model_required) {
    auto* opt = command.add_option("--model,-m", model,
                                   "llama2.c checkpoint (.bin), Hugging Face model directory, Meta's original folder "
                                   "(params.json + consolidated.NN.pth), .safetensors file, or "
                                   "llama.cpp .gguf file (F32/F16/BF16; Q8_0, Q4_0, Q4_K, Q5_K, Q6_K dequantized to "
                                   "BF16 on load)");
    if (model_required) opt->required();
    command.add_option("--tokenizer,-t", tokenizer,
                       "tokenizer.json, tokenizer.model (tiktoken or SentencePiece), llama2.c tokenizer.bin or a .gguf "
                       "file's embedded tokenizer "
                       "(default: the one next to the model)");
}

void ModelArgs::add_runtime_options_to(CLI::App& command) {
    command
        .add_option("--weights-dtype", weights_dtype,
                    "weight matrices in memory: file (as stored; BF16 products round activations to BF16), f32 "
                    "(expanded to fp32, exact fp32 products, twice the memory of a BF16 file) or bf16")
        ->capture_default_str();
    add_numerics_options_to(command);
}

void ModelArgs::add_numerics_options_to(CLI::App& command) {
    command
        .add_option("--matmul", matmul,
                    "matrix products: exact (fp32 activations, weights widened to fp32) or bf16 (with BF16 "
                    "weights, activations rounded to BF16: about twice the arithmetic rate, llama.cpp's numerics)")
        ->capture_default_str();
    command
        .add_option("--kv-dtype", kv_dtype,
                    "KV cache elements: f32, or bf16 (keys and values rounded to BF16 as they are stored: half the "
                    "cache's memory and of the bytes a decode step reads; attention still computes in fp32)")
        ->capture_default_str();
}

LoadOptions ModelArgs::load_options() const {
    return LoadOptions{.weights_dtype = parse_mode<WeightsDType>(weights_dtype, "--weights-dtype")};
}

MatmulPrecision ModelArgs::matmul_precision() const {
    return parse_mode<MatmulPrecision>(matmul, "--matmul");
}

KvDType ModelArgs::kv_cache_dtype() const {
    return parse_mode<KvDType>(kv_dtype, "--kv-dtype");
}

std::unique_ptr<Tokenizer> load_tokenizer_for(const ModelArgs& args) {
    if (!args.tokenizer.empty()) return load_tokenizer(args.tokenizer);
    const std::filesystem::path found = find_tokenizer_for_model(args.model);
    KASCADE_CHECK(!found.empty(),
                  "no tokenizer found next to model \"{}\" (looked for tokenizer.json, tokenizer.model, "
                  "tokenizer*.bin, tok*.bin); pass one with --tokenizer",
                  args.model);
    return load_tokenizer(found);
}

}  // namespace kascade::cli
