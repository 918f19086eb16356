// kernels/kv_ptr.h: a read-only pointer into keys or values stored as fp32 or BF16 (the KV cache's --kv-dtype).
//
// The attention kernels take K and V as KvPtr: it converts implicitly from `const float*` (so fp32 callers and the
// tests pass plain arrays) and is made from BF16 bits with KvPtr::bf16(). Offsets are in elements, as with a plain
// pointer (`k + row * head_dim`). A kernel either widens rows to fp32 as it loads them (decode: the rows are read once,
// so the narrower type halves the bytes) or widens a block of rows into scratch and runs its fp32 micro-kernels
// (prefill: each row is reused by many queries). Either way only the stored K/V are rounded; products and sums stay
// fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "base/modes.h"

namespace kascade {

class KvPtr {
  public:
    KvPtr() = default;
    KvPtr(std::nullptr_t) {}
    KvPtr(const float* p) : data_(p), dtype_(KvDType::F32) {}  // NOLINT: implicit, fp32 arrays are the common case
    static KvPtr bf16(const uint16_t* p) {
        KvPtr r;
        r.data_ = p;
        r.dtype_ = KvDType::BF16;
        return r;
    }

    KvDType dtype() const { return dtype_; }
    bool is_null() const { return data_ == nullptr; }
    const float* f32() const {
        KASCADE_ASSERT(dtype_ == KvDType::F32);
        return static_cast<const float*>(data_);
    }
    const uint16_t* bf16() const {
        KASCADE_ASSERT(dtype_ == KvDType::BF16);
        return static_cast<const uint16_t*>(data_);
    }

    KvPtr operator+(int64_t elements) const {
        KvPtr r = *this;
        r.data_ = dtype_ == KvDType::F32 ? static_cast<const void*>(static_cast<const float*>(data_) + elements)
                                         : static_cast<const void*>(static_cast<const uint16_t*>(data_) + elements);
        return r;
    }

    /// Calls f with the typed pointer (const float* or const uint16_t*): the kernels' one dispatch on the dtype.
    template <typename F>
    decltype(auto) visit(F&& f) const {
        return dtype_ == KvDType::F32 ? f(static_cast<const float*>(data_)) : f(static_cast<const uint16_t*>(data_));
    }

  private:
    const void* data_ = nullptr;
    KvDType dtype_ = KvDType::F32;
};

inline bool operator==(KvPtr p, std::nullptr_t) {
    return p.is_null();
}

/// Writes n consecutive elements from src to dst as floats (a copy for fp32, widened for BF16).
void kv_to_float(KvPtr src, int64_t n, float* dst);

/// The n elements at src as floats: src itself for fp32, else widened into `scratch` (room for n floats).
inline const float* kv_as_float(KvPtr src, int64_t n, float* scratch) {
    if (src.dtype() == KvDType::F32) return src.f32();
    kv_to_float(src, n, scratch);
    return scratch;
}

}  // namespace kascade
