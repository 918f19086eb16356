// io/weights/weight_storage.cpp: WeightPlacement, and the small helpers of model_weights.h.
#include "io/weights/weight_storage.h"

#include <array>
#include <cstring>

#include "base/error.h"

namespace kascade {

void weight_row_to_f32(const WeightMatrix& m, int row, float* out) {
    const std::size_t size = dtype_size(m.dtype);
    const auto* src = static_cast<const std::uint8_t*>(m.data) + static_cast<std::size_t>(row) * m.cols * size;
    convert_to_f32(m.dtype, src, out, static_cast<std::size_t>(m.cols));
}

std::size_t ModelWeights::matrix_bytes() const {
    auto bytes = [](const WeightMatrix& m) {
        return static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols) * dtype_size(m.dtype);
    };
    std::size_t total = bytes(embed) + (lm_head.data == embed.data ? 0 : bytes(lm_head));
    for (const LayerWeights& l : layers) {
        for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) total += bytes(*m);
    }
    return total;
}

std::uint8_t* WeightPlacement::queue(DType from, DType to, const std::uint8_t* src, std::size_t n) {
    std::uint8_t* dst = storage_.allocate(n * dtype_size(to));
    pending_.push_back({from, to, src, dst, n});
    return dst;
}

const float* WeightPlacement::vector(DType dtype, const std::uint8_t* data, std::size_t n) {
    if (dtype == DType::F32 && reinterpret_cast<std::uintptr_t>(data) % alignof(float) == 0) {
        return reinterpret_cast<const float*>(data);
    }
    return reinterpret_cast<const float*>(queue(dtype, DType::F32, data, n));
}

WeightMatrix WeightPlacement::matrix(DType dtype, const std::uint8_t* data, int rows, int cols) {
    const DType to = target_ == WeightsDType::F32 ? DType::F32 : target_ == WeightsDType::BF16 ? DType::BF16 : dtype;
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    WeightMatrix m{to, data, rows, cols};
    if (to != dtype || reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) != 0) {
        m.data = queue(dtype, to, data, n);
    }
    return m;
}

void WeightPlacement::finish() {
    std::vector<F32Conversion> to_f32;
    for (const Pending& p : pending_) {
        if (p.to == DType::F32) to_f32.push_back({p.from, p.src, reinterpret_cast<float*>(p.dst), p.n});
    }
    convert_to_f32(to_f32);
    for (const Pending& p : pending_) {
        if (p.to == DType::F32) continue;
        if (p.from == p.to) {  // same dtype, realigned
            std::memcpy(p.dst, p.src, p.n * dtype_size(p.to));
            continue;
        }
        // To BF16 (or F16) through fp32, a block at a time so no whole-tensor fp32 copy is made.
        constexpr std::size_t kBlock = 1 << 16;
        std::vector<float> block(std::min(p.n, kBlock));
        for (std::size_t i = 0; i < p.n; i += kBlock) {
            const std::size_t len = std::min(kBlock, p.n - i);
            convert_to_f32(p.from, p.src + i * dtype_size(p.from), block.data(), len);
            convert_from_f32(p.to, block.data(), p.dst + i * dtype_size(p.to), len);
        }
    }
    pending_.clear();
}

}  // namespace kascade
