#include "collective/algorithms/ring.h"

#include <algorithm>
#include <vector>

#include "collective/reduce.h"

namespace cohort::collective {

namespace {

int Mod(int value, int n) { return ((value % n) + n) % n; }

// Sends `send_bytes` from `send` to next and receives `recv_bytes` into
// `recv` from prev, in chunks of whole elements (`element` bytes), calling
// `on_chunk(offset, length)` after each received chunk. Every chunk is
// queued before the first receive (Send does not wait for the peer), so the
// transport streams them while this thread receives and reduces.
template <typename OnChunk>
absl::Status ExchangeChunks(const OpContext& ctx, uint32_t step, size_t element,
                            const char* send, size_t send_bytes, char* recv,
                            size_t recv_bytes, OnChunk on_chunk) {
  const size_t chunk = std::max<size_t>(ctx.chunk_bytes / element, 1) * element;
  // At least one (possibly empty) message each way, so that even an empty
  // segment carries the signature for mismatch detection.
  const size_t send_chunks =
      std::max<size_t>((send_bytes + chunk - 1) / chunk, 1);
  const size_t recv_chunks =
      std::max<size_t>((recv_bytes + chunk - 1) / chunk, 1);
  for (size_t c = 0; c < send_chunks; ++c) {
    const size_t at = c * chunk;
    const size_t len = std::min(chunk, send_bytes - std::min(at, send_bytes));
    absl::Status sent =
        ctx.Send(ctx.next(), step, static_cast<uint32_t>(c), send + at, len);
    if (!sent.ok()) return sent;
  }
  for (size_t c = 0; c < recv_chunks; ++c) {
    const size_t at = c * chunk;
    const size_t len = std::min(chunk, recv_bytes - std::min(at, recv_bytes));
    absl::Status received =
        ctx.Recv(ctx.prev(), step, static_cast<uint32_t>(c), recv + at, len);
    if (!received.ok()) return received;
    on_chunk(at, len);
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
  std::vector<char> scratch(segments.length(0) * element);
  for (int s = 0; s < n - 1; ++s) {
    // Step s: pass on the segment reduced so far, add our part to the one
    // arriving. After n-1 steps segment r has passed through every rank.
    const int send_segment = Mod(r - s - 1, n);
    const int recv_segment = Mod(r - s - 2, n);
    char* target = data + segments.offset(recv_segment) * element;
    absl::Status status = ExchangeChunks(
        ctx, first_step + static_cast<uint32_t>(s), element,
        data + segments.offset(send_segment) * element,
        segments.length(send_segment) * element, scratch.data(),
        segments.length(recv_segment) * element, [&](size_t at, size_t bytes) {
          Accumulate(target + at, scratch.data() + at, bytes / element, dtype,
                     op);
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
        data + segments.offset(recv_segment) * element,
        segments.length(recv_segment) * element, [](size_t, size_t) {});
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
