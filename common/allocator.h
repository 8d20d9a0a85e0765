#pragma once

// Collective and tensor chunks are megabytes each, allocated and freed at a
// high rate. glibc serves an allocation over its mmap threshold (128 KiB at
// first) with a fresh mmap and returns it with munmap, so every chunk pays
// for page faults and zeroed pages; measured, that halved the gRPC path's
// throughput at 1 and 16 MiB. Raising the threshold (and the heap's trim
// threshold) keeps such buffers in the heap, where they are reused.

namespace cohort {

// Process-wide; call once at the start of main(), before threads start.
void KeepLargeAllocationsInTheHeap();

}  // namespace cohort
