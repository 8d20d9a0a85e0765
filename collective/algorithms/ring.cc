#include "collective/algorithms/ring.h"

#include <algorithm>

#include "collective/reduce.h"

namespace cohort::collective {

namespace {

int Mod(int value, int n) { return ((value % n) + n) % n; }

// Chunks of whole elements that fit the transport's window at least twice
// over, so that a bounded transport (a shared-memory ring) always has room
// for the chunks in flight.
size_t ChunkBytes(const OpContext& ctx, size_t element) {
  const size_t limit =
      std::min(ctx.chunk_bytes, ctx.transport->send_window_bytes() / 2);
  return std::max<size_t>(limit / element, 1) * element;
}

// Sends `send_bytes` from `send` to next and receives `recv_bytes` from prev,
// in chunks of whole elements (`element` bytes). `receive(step, chunk,
// offset, length)` takes each chunk from prev. Sends run ahead of receives
// by the transport's window (all of them over gRPC, whose Send only
// queues), so the transport streams while this thread reduces.
template <typename Receive>
absl::Status ExchangeChunks(const OpContext& ctx, uint32_t step, size_t element,
                            const char* send, size_t send_bytes,
                            size_t recv_bytes, Receive receive) {
  const size_t chunk = ChunkBytes(ctx, element);
  // At least one (possibly empty) message each way, so that even an empty
  // segment carries the signature for mismatch detection.
  const size_t send_chunks =
      std::max<size_t>((send_bytes + chunk - 1) / chunk, 1);
  const size_t recv_chunks =
      std::max<size_t>((recv_bytes + chunk - 1) / chunk, 1);
  // With every rank at most `window` chunks ahead, no ring of sends can
  // wait on itself.
  const size_t window =
      std::max<size_t>(ctx.transport->send_window_bytes() / chunk, 1);
  size_t sent = 0;
  auto send_next = [&] {
    const size_t at = sent * chunk;
    const size_t len = std::min(chunk, send_bytes - std::min(at, send_bytes));
    return ctx.Send(ctx.next(), step, static_cast<uint32_t>(sent++), send + at,
                    len);
  };
  for (size_t received = 0; received < recv_chunks; ++received) {
    while (sent < send_chunks && sent - received < window) {
      if (absl::Status s = send_next(); !s.ok()) return s;
    }
    const size_t at = received * chunk;
    const size_t len = std::min(chunk, recv_bytes - std::min(at, recv_bytes));
    absl::Status status =
        receive(step, static_cast<uint32_t>(received), at, len);
    if (!status.ok()) return status;
  }
  while (sent < send_chunks) {
    if (absl::Status s = send_next(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RingReduceScatter(const OpContext& ctx, char* data,
                               const Segments& segments, DType dtype,
                               ReduceOp op, uint32_t first_step) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t element = DTypeSize(dtype);
  for (int s = 0; s < n - 1; ++s) {
    // Step s: pass on the segment reduced so far, add our part to the one
    // arriving. After n-1 steps segment r has passed through every rank.
    const int send_segment = Mod(r - s - 1, n);
    const int recv_segment = Mod(r - s - 2, n);
    char* target = data + segments.offset(recv_segment) * element;
    absl::Status status =
        ExchangeChunks(ctx, first_step + static_cast<uint32_t>(s), element,
                       data + segments.offset(send_segment) * element,
                       segments.length(send_segment) * element,
                       segments.length(recv_segment) * element,
                       [&](uint32_t step, uint32_t chunk, size_t at,
                           size_t bytes) -> absl::Status {
                         // Reduced straight from the transport's buffers: no
                         // copy first.
                         absl::StatusOr<absl::Cord> got =
                             ctx.RecvCord(ctx.prev(), step, chunk, bytes);
                         if (!got.ok()) return got.status();
                         Accumulate(target + at, *got, dtype, op);
                         return absl::OkStatus();
                       });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status RingAllGather(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype,
                           uint32_t first_step) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t element = DTypeSize(dtype);
  for (int s = 0; s < n - 1; ++s) {
    const int send_segment = Mod(r - s, n);
    const int recv_segment = Mod(r - s - 1, n);
    absl::Status status = ExchangeChunks(
        ctx, first_step + static_cast<uint32_t>(s), element,
        data + segments.offset(send_segment) * element,
        segments.length(send_segment) * element,
        segments.length(recv_segment) * element,
        [&](uint32_t step, uint32_t chunk, size_t at, size_t bytes) {
          return ctx.Recv(ctx.prev(), step, chunk,
                          data + segments.offset(recv_segment) * element + at,
                          bytes);
        });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
