// base/cache_aligned.h: std::vector storage that starts on a 64-byte cache line, and puts large buffers on huge pages.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kascade {

/// Allocates on 64-byte boundaries. A large std::vector from the default allocator starts 16 bytes past a page
/// boundary, so each 128-byte BF16 row of a KV cache (head_dim 64) straddled three cache lines instead of two: a
/// decode reading 10 % of 32K keys at scattered positions measured 1.3x slower that way (2-core Zen 5).
///
/// Buffers of kHugePageBytes or more (a KV cache layer from a few thousand positions on) are aligned to and sized in
/// whole 2 MiB pages and, on Linux, advised to transparent huge pages (MADV_HUGEPAGE; Debian's default THP mode is
/// `madvise`, so without the advice they stay in 4 KiB pages). A decode step reads 32K-key caches at 4 KiB pages with
/// a TLB miss for nearly every scattered row and every page of a dense pass: on huge pages dense decode attention at
/// 32K keys measured 1.15-1.3x faster and a reuse layer's scattered 10 % 1.3x (2-core Zen 5, bench/README.md). Where
/// the kernel has no THP the advice is ignored and the buffer is an ordinary one.
template <typename T>
struct CacheLineAllocator {
    using value_type = T;
    static constexpr std::align_val_t kAlignment{64};
    static constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

    CacheLineAllocator() = default;
    template <typename U>
    CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator

    T* allocate(std::size_t n) {
        const std::size_t bytes = n * sizeof(T);
        if (bytes < kHugePageBytes) return static_cast<T*>(::operator new(bytes, kAlignment));
        const std::size_t whole = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
        void* p = ::operator new (whole, std::align_val_t{kHugePageBytes});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        ::madvise(p, whole, MADV_HUGEPAGE);  // a hint: failure leaves 4 KiB pages, which work the same
#endif
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n * sizeof(T) < kHugePageBytes) {
            ::operator delete(p, kAlignment);
        } else {
            ::operator delete (p, std::align_val_t{kHugePageBytes});
        }
    }

    template <typename U>
    bool operator==(const CacheLineAllocator<U>&) const noexcept {
        return true;
    }
};

/// A std::vector whose data() is 64-byte aligned (2 MiB aligned, on huge pages where the OS gives them, from
/// CacheLineAllocator::kHugePageBytes on).
template <typename T>
using CacheAlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace kascade
