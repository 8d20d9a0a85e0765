#pragma once

// What the pipelined algorithms (ring, direct, reduce to root, chain
// broadcast) share: how big a chunk is, how far sends run ahead of
// receives, and how a lent pass ends.

#include <cstddef>

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// A ring pass's sends run at most this far ahead of its receives, even over
// a transport that would take more (gRPC): further ahead, a chunk has left
// the cache by the time the transport reads it, and the transport holds
// more of them. (The direct path bounds each peer's link instead.)
inline constexpr size_t kMaxAheadBytes = 4 << 20;

// How far sends may run ahead of receives.
size_t WindowBytes(const OpContext& ctx);

// Chunks of whole elements, of ctx.chunk_bytes within the transport's
// bounds, that fit the window at least twice over, so that a bounded
// transport (a shared-memory ring) always has room for the chunks in
// flight. The same on every rank of a group.
size_t ChunkBytes(const OpContext& ctx, size_t element);

// Adds chunk `chunk` of `step` from `peer` into `target`, straight from the
// transport's buffers: no copy first.
absl::Status ReduceFrom(const OpContext& ctx, int peer, uint32_t step,
                        uint32_t chunk, char* target, size_t bytes, DType dtype,
                        ReduceOp op);

// Ends a pass that lent buffers: waits until the transport reads none of
// them, so that the caller may reuse them whether the pass (`status`)
// succeeded or not. Returns the pass's failure, else the wait's.
absl::Status ReclaimingLent(const OpContext& ctx, absl::Status status);

}  // namespace cohort::collective
