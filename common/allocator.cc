#include "common/allocator.h"

#include <malloc.h>

namespace cohort {

void KeepLargeAllocationsInTheHeap() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; chunks
  // are a few MiB. Freed heap memory is kept up to 1 GiB before trimming.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace cohort
