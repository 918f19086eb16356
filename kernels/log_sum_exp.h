// kernels/log_sum_exp.h: log(sum_i e^{z_i}) of a row of logits, the normaliser of a log-softmax (perplexity scoring:
// nll = log_sum_exp(logits) - logits[target]).
#pragma once

#include <cstdint>

namespace kascade {

/// z: [n], n >= 1. Computed as max + log(sum e^{z_i - max}) with exp_simd (kernels/exp_simd.h), in one pass over z with
/// the maximum found block by block (the sum rescaled when it grows); the terms are summed
/// in fp32 over blocks of kLogSumExpBlock values and the block sums in double, so the relative error of the sum stays
/// near fp32 rounding for vocabularies of any size. All -inf gives -inf; a +inf gives +inf; a NaN gives NaN.
double log_sum_exp(const float* z, int64_t n);

/// Values summed in fp32 before a block's sum joins the double total.
constexpr int64_t kLogSumExpBlock = 1024;

}  // namespace kascade
