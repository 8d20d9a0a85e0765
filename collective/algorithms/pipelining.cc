#include "collective/algorithms/pipelining.h"

#include <algorithm>

#include "collective/reduce.h"

namespace cohort::collective {

namespace {

// How long past the deadline (after a success) or past a failure the
// transport may take to hand back what a pass lent it. Short, because a
// failure is reported only after it: a live peer reads what is in flight
// within it, and a peer behind a cut link never will.
constexpr absl::Duration kReclaimGrace = absl::Milliseconds(250);

}  // namespace

size_t WindowBytes(const OpContext& ctx) {
  return std::min(ctx.transport->send_window_bytes(), kMaxAheadBytes);
}

size_t ChunkBytes(const OpContext& ctx, size_t element) {
  const size_t limit =
      std::min(std::max(ctx.chunk_bytes, ctx.transport->min_chunk_bytes()),
               WindowBytes(ctx) / 2);
  return std::max<size_t>(limit / element, 1) * element;
}

absl::Status ReduceFrom(const OpContext& ctx, int peer, uint32_t step,
                        uint32_t chunk, char* target, size_t bytes, DType dtype,
                        ReduceOp op) {
  absl::StatusOr<absl::Cord> got = ctx.RecvCord(peer, step, chunk, bytes);
  if (!got.ok()) return got.status();
  Accumulate(target, *got, dtype, op);
  return absl::OkStatus();
}

absl::Status ReclaimingLent(const OpContext& ctx, absl::Status status) {
  const absl::Time grace = absl::Now() + kReclaimGrace;
  const absl::Status reclaimed = ctx.transport->ReclaimLent(
      status.ok() ? std::max(ctx.deadline, grace) : grace);
  return status.ok() ? reclaimed : status;
}

}  // namespace cohort::collective
