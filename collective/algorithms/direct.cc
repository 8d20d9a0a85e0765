#include "collective/algorithms/direct.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collective/algorithms/pipelining.h"
#include "collective/reduce.h"
#include "common/status_macros.h"

namespace cohort::collective {

namespace {

// Copies `cord` to `out`, which has room for all of it.
void CopyCord(const absl::Cord& cord, char* out) {
  for (absl::string_view piece : cord.Chunks()) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
}

// Chunks sent to each peer ahead of the receives, so that the transport
// streams while this thread reduces. ChunkBytes leaves room for two chunks
// in a link's window, so a transport whose links hold twice their window
// (the shared-memory ring) never makes these sends wait. Among n ranks this
// is 2(n - 1) chunks in flight, past kMaxAheadBytes for 3 ranks and more:
// the direct path is for buffers of a few MiB.
constexpr size_t kAheadChunks = 2;

// One step: chunk c of segment `send_segment(peer)` goes to every peer, and
// chunk c of segment `target` (or of the peer's own, when `target` is -1)
// comes from every peer, in chunk order: `receive(peer, c, at, bytes)`
// takes it, `at` being its place in `data`. A segment has at least one
// (possibly empty) chunk, so that signatures are compared even for an empty
// one. Every rank sends chunk c to all before it waits for chunk c from
// any, within the window, so no rank waits on one that waits on it.
template <typename Send, typename Receive>
absl::Status Step(const OpContext& ctx, uint32_t step, char* data,
                  const Segments& segments, size_t element, int target,
                  Send send_segment, Receive receive) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t chunk = ChunkBytes(ctx, element);
  auto chunks = [&](int segment) {
    const size_t bytes = segments.length(segment) * element;
    return std::max<size_t>((bytes + chunk - 1) / chunk, 1);
  };
  // Where chunk `c` of `segment` lies, and its length.
  auto piece = [&](int segment, size_t c) -> std::pair<char*, size_t> {
    const size_t total = segments.length(segment) * element;
    const size_t at = std::min(c * chunk, total);
    return {data + segments.offset(segment) * element + at,
            std::min(chunk, total - at)};
  };
  size_t most = 0;
  for (int segment = 0; segment < n; ++segment) {
    most = std::max(most, chunks(segment));
  }
  size_t sent = 0;
  auto send_next = [&]() -> absl::Status {
    // Peers from next on, so that no two ranks send to the same one first.
    for (int i = 1; i < n; ++i) {
      const int peer = (r + i) % n;
      const int segment = send_segment(peer);
      if (sent >= chunks(segment)) continue;
      const auto [at, bytes] = piece(segment, sent);
      COHORT_RETURN_IF_ERROR(
          ctx.SendLent(peer, step, static_cast<uint32_t>(sent), at, bytes));
    }
    ++sent;
    return absl::OkStatus();
  };
  for (size_t c = 0; c < most; ++c) {
    while (sent < most && sent < c + kAheadChunks) {
      COHORT_RETURN_IF_ERROR(send_next());
    }
    for (int i = 1; i < n; ++i) {
      const int peer = (r + i) % n;
      const int segment = target < 0 ? peer : target;
      if (c >= chunks(segment)) continue;
      const auto [at, bytes] = piece(segment, c);
      COHORT_RETURN_IF_ERROR(
          receive(peer, static_cast<uint32_t>(c), at, bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status Run(const OpContext& ctx, char* data, const Segments& segments,
                 DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t element = DTypeSize(dtype);
  // Reduce-scatter: rank j gets every rank's part of segment j. In the ring,
  // segment r starts at r + 1 and each rank on the way combines its own part
  // with what came (op(own, so far)), r last: r + 1, r + 2, ..., r - 1, r.
  // Contributions are taken in that order and folded as they come, into
  // `partial`; the last fold is into this rank's own part.
  std::vector<char> partial(n > 2 ? ChunkBytes(ctx, element) : 0);
  COHORT_RETURN_IF_ERROR(Step(
      ctx, 0, data, segments, element, /*target=*/r,
      [](int peer) { return peer; },
      [&](int peer, uint32_t c, char* at, size_t bytes) -> absl::Status {
        absl::StatusOr<absl::Cord> got = ctx.RecvCord(peer, 0, c, bytes);
        if (!got.ok()) return got.status();
        // As the ring's rank `peer` would: op(its own, what came so far).
        const bool first = peer == (r + 1) % n;
        const bool last = peer == (r + n - 1) % n;
        if (first && last) {  // 2 ranks: the one contribution
          Accumulate(at, *got, dtype, op);
        } else if (first) {
          CopyCord(*got, partial.data());
        } else {
          AccumulateSrcFirst(partial.data(), *got, dtype, op);
        }
        if (last) {
          if (!first)
            Accumulate(at, partial.data(), bytes / element, dtype, op);
          if (op == ReduceOp::kMean) {
            DivideForMean(at, bytes / element, dtype, n);
          }
        }
        return absl::OkStatus();
      }));
  // All-gather: every rank sends its final segment to every other. The
  // chunks lent in the reduce-scatter are written here only on receiving
  // what their owner sends after it has taken them all in.
  return Step(
      ctx, 1, data, segments, element, /*target=*/-1, [r](int) { return r; },
      [&](int peer, uint32_t c, char* at, size_t bytes) {
        return ctx.Recv(peer, 1, c, at, bytes);
      });
}

}  // namespace

bool DirectFits(int size, size_t bytes) {
  constexpr size_t kMaxSegmentBytes = 512 << 10;
  return size >= 3 && size <= 16 &&
         bytes < kMaxSegmentBytes * static_cast<size_t>(size);
}

absl::Status DirectAllReduce(const OpContext& ctx, char* data,
                             const Segments& segments, DType dtype,
                             ReduceOp op) {
  return ReclaimingLent(ctx, Run(ctx, data, segments, dtype, op));
}

}  // namespace cohort::collective
