// io/weights/gguf_checkpoint.h: a llama.cpp GGUF model file (general.architecture "llama") as ModelWeights.
#pragma once

#include <filesystem>

#include "io/weights/gguf_file.h"
#include "io/weights/model_weights.h"

namespace kascade {

/// The hyper-parameters of the `llama.*` keys (context_length, embedding_length, block_count, feed_forward_length,
/// attention.head_count / head_count_kv / key_length / value_length / layer_norm_rms_epsilon, rope.freq_base /
/// dimension_count / scaling.type / scaling.factor, vocab_size), BOS/EOS from `tokenizer.ggml.*`. Other
/// architectures, partial RoPE, mixtures of experts and RoPE scaling other than linear are refused naming the key.
/// A rope_freqs tensor (Llama 3.1's RoPE scaling, which llama.cpp's converter stores as a factor per frequency)
/// becomes rope_freq_factors.
ModelConfig gguf_model_config(const GgufFile& file);

/// Loads the tensors of a GGUF file under llama.cpp's names (token_embd, blk.N.attn_q, ..., output_norm, output;
/// no output tensor means tied embeddings), every shape checked against the config. The rows of attn_q and attn_k,
/// which llama.cpp's converter reorders for its interleaved RoPE (LlamaModel.permute), are put back in Hugging
/// Face's order, so the matrices equal those of the Hugging Face checkpoint the file was made from.
///
/// Dtypes: F32, F16 and BF16 tensors are placed as model_weights.h describes (in place when the options keep the
/// file's dtype); Q8_0, Q4_0, Q4_K, Q5_K and Q6_K are dequantized on load to BF16 (to fp32 with --weights-dtype
/// f32). Other ggml types are refused naming the tensor.
ModelWeights load_gguf_checkpoint(const std::filesystem::path& path, const LoadOptions& options = {});

}  // namespace kascade
