#pragma once

// One-shot all-reduce for small buffers, where latency, not bandwidth,
// decides: every rank sends its whole buffer to every peer at once and
// reduces what arrives. One message latency instead of the ring's 2(n-1);
// each rank sends (n-1) buffers instead of 2(n-1)/n of one.

#include <cstddef>

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// Up to this many bytes, AllReduce takes the one-shot path.
inline constexpr size_t kOneShotMaxBytes = 32 << 10;

// Whether `bytes` take the one-shot path: small, and within the send
// window, since every rank sends before it receives.
inline bool OneShotFits(const Transport& transport, size_t bytes) {
  return bytes <= kOneShotMaxBytes && bytes <= transport.send_window_bytes();
}

// Reduces `count` elements of `data` over all ranks, in place. Every rank
// adds the contributions in rank order, so every rank ends with the same
// bits. MEAN divides once, at the end. Uses step 0.
absl::Status OneShotAllReduce(const OpContext& ctx, char* data, size_t count,
                              DType dtype, ReduceOp op);

}  // namespace cohort::collective
