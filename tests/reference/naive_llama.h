// tests/reference/naive_llama.h: an independent, obviously-correct Llama forward pass for the tests.
//
// Double precision, plain loops, materialised attention scores; it shares no code with the runtime (not the
// loaders, not the kernels), so agreement between the two is evidence that both are right. Built as the library
// kascade_test_reference (naive_llama.cpp) at the build's optimisation, whatever level the tests using it compile at.
#pragma once

#include <cstdint>
#include <vector>

namespace naive {

// Weights are stored as float (checkpoint values are exactly representable) to halve the memory of the big shapes;
// every computation is in double.
using Weights = std::vector<float>;

struct Layer {
    Weights attn_norm, wq, wk, wv, wo, mlp_norm, gate, up, down;  // [out][in] matrices
    Weights bq, bk, bv, bo;                                       // biases, empty when absent
    Weights q_norm, k_norm;  // [head_dim] per-head RMSNorm of q and k before RoPE, empty when absent
    int window = 0;          // a query at position p sees keys p - window < j <= p; 0 = all
};

struct Model {
    int dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab = 0;
    double rope_theta = 10000, eps = 1e-5;
    std::vector<double> rope_inv_freq;  // [head_dim/2] scaled frequencies; empty = theta^(-2j/head_dim)
    double rope_attention_factor = 1;   // multiplies cos and sin (YaRN)
    bool interleaved_rope = false;      // llama2.c pairs (2j, 2j+1); HF pairs (j, j + head_dim/2)
    // The declared numerics of products with BF16 weights (kernels/matmul.h): the input vector of every matrix
    // product is rounded to BF16 (nearest even) first; the products and sums stay exact (here: double).
    bool bf16_matmul_inputs = false;
    // A BF16 KV cache (--kv-dtype bf16): every key (after RoPE) and value is rounded to BF16 (nearest even) before any
    // query attends to it; the attention itself stays exact.
    bool bf16_kv = false;
    Weights embed, final_norm, lm_head;
    std::vector<Layer> layers;
};

/// Logits [tokens.size()][vocab] of a causal forward pass over `tokens` from position 0.
std::vector<std::vector<double>> logits(const Model& m, const std::vector<int32_t>& tokens);

}  // namespace naive
