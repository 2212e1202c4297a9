// Transparent huge pages for large arrays indexed at random (a policy's per-block links, the replay
// tool's residency bytes and interning table). With 4 KiB pages every random read of an array of
// tens of MB also misses the TLB and walks the page table; 2 MiB pages make those walks rare, and
// filling the array takes 512 times fewer page faults.
//
// Where the kernel's THP mode is "madvise" (Debian's default) an array gets huge pages only when
// asked, before its pages are first written; under "always" this is redundant, under "never"
// ignored. Everything here is a hint: failures are ignored and nothing observable changes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Advises huge pages for the whole 2 MiB pages inside [data, data + bytes). Arrays smaller than a
// few huge pages are left alone (they fit the TLB's reach anyway).
inline void AdviseHugePages(const void* data, size_t bytes) {
  if (bytes < 4 * kHugePageBytes) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
  const uintptr_t last = (begin + bytes) & ~(kHugePageBytes - 1);
  if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Gives `v` capacity for at least `n` elements, advising huge pages on new storage before anything
// is written to it (std::vector::reserve would copy the old elements into 4 KiB pages first).
template <typename T>
void ReserveHuge(std::vector<T>& v, size_t n) {
  if (n <= v.capacity()) return;
  std::vector<T> bigger;
  bigger.reserve(n);
  AdviseHugePages(bigger.data(), n * sizeof(T));
  bigger.insert(bigger.end(), v.begin(), v.end());
  v.swap(bigger);
}

}  // namespace kvtier
