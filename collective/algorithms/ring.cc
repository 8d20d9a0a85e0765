#include "collective/algorithms/ring.h"

#include <algorithm>
#include <utility>

#include "collective/algorithms/pipelining.h"
#include "collective/reduce.h"
#include "common/status_macros.h"

namespace cohort::collective {

namespace {

int Mod(int value, int n) { return ((value % n) + n) % n; }

// A position in a pass: a chunk of a step, and how many chunks came before.
struct Cursor {
  int step = 0;
  size_t chunk = 0;
  size_t passed = 0;

  void Advance(size_t chunks_in_step) {
    ++passed;
    if (++chunk == chunks_in_step) {
      chunk = 0;
      ++step;
    }
  }
};

// Runs `steps` ring steps as one pipeline. At step s this rank sends segment
// r - s - shift to next, and receives from prev the segment it sends on at
// step s + 1; `receive(step, chunk, target, bytes)` takes chunk `chunk` of
// that step into `target`. A chunk goes on at step s as soon as the same
// chunk of step s - 1 is in. Sends run ahead of receives by up to
// WindowBytes, so the transport streams while this thread reduces.
//
// Lending a chunk is safe: a chunk sent at step s is next written at step
// s + n - 1, on receiving what prev sent after the chunk had gone once round
// the ring, so by then the transport has sent it. Only the last sends can
// still be in flight when the pass ends, which is why RingPass reclaims
// them.
template <typename Receive>
absl::Status RingSteps(const OpContext& ctx, int steps, int shift, char* data,
                       const Segments& segments, size_t element,
                       Receive receive) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t chunk = ChunkBytes(ctx, element);
  auto sent_segment = [&](int step) { return Mod(r - step - shift, n); };
  auto segment_bytes = [&](int segment) {
    return segments.length(segment) * element;
  };
  // At least one (possibly empty) chunk per step, so that even an empty
  // segment carries the signature for mismatch detection.
  auto chunks_in = [&](int segment) {
    return std::max<size_t>((segment_bytes(segment) + chunk - 1) / chunk, 1);
  };
  // Where chunk `c` of `segment` lies in `data`, and its length.
  auto piece = [&](int segment, size_t c) -> std::pair<char*, size_t> {
    const size_t total = segment_bytes(segment);
    const size_t at = std::min(c * chunk, total);
    return {data + segments.offset(segment) * element + at,
            std::min(chunk, total - at)};
  };
  // With every rank at most `window` chunks ahead, and every chunk waiting
  // only on an earlier one from prev, no ring of waits can close on itself.
  const size_t window = std::max<size_t>(WindowBytes(ctx) / chunk, 1);
  Cursor sent, received;
  auto ready = [&] {
    if (sent.step >= steps || sent.passed >= received.passed + window) {
      return false;
    }
    // The chunk is final once it came in at the step before.
    return sent.step == 0 || received.step >= sent.step ||
           (received.step == sent.step - 1 && received.chunk > sent.chunk);
  };
  auto send_next = [&]() -> absl::Status {
    const int segment = sent_segment(sent.step);
    const auto [at, bytes] = piece(segment, sent.chunk);
    const auto step = static_cast<uint32_t>(sent.step);
    const auto index = static_cast<uint32_t>(sent.chunk);
    absl::Status status = ctx.SendLent(ctx.next(), step, index, at, bytes);
    sent.Advance(chunks_in(segment));
    return status;
  };
  while (received.step < steps) {
    while (ready()) COHORT_RETURN_IF_ERROR(send_next());
    const int segment = sent_segment(received.step + 1);
    const auto [at, bytes] = piece(segment, received.chunk);
    COHORT_RETURN_IF_ERROR(receive(static_cast<uint32_t>(received.step),
                                   static_cast<uint32_t>(received.chunk), at,
                                   bytes));
    received.Advance(chunks_in(segment));
  }
  while (sent.step < steps) COHORT_RETURN_IF_ERROR(send_next());
  return absl::OkStatus();
}

// RingSteps, then the wait until the transport no longer reads `data`: the
// caller may reuse it on return, whether the pass succeeded or not.
template <typename Receive>
absl::Status RingPass(const OpContext& ctx, int steps, int shift, char* data,
                      const Segments& segments, size_t element,
                      Receive receive) {
  return ReclaimingLent(
      ctx, RingSteps(ctx, steps, shift, data, segments, element, receive));
}

}  // namespace

absl::Status RingReduceScatter(const OpContext& ctx, char* data,
                               const Segments& segments, DType dtype,
                               ReduceOp op) {
  // Step s passes on the segment reduced so far and adds our part to the one
  // arriving. After n-1 steps segment r has passed through every rank.
  return RingPass(
      ctx, ctx.size() - 1, 1, data, segments, DTypeSize(dtype),
      [&](uint32_t step, uint32_t chunk, char* target, size_t bytes) {
        return ReduceFrom(ctx, ctx.prev(), step, chunk, target, bytes, dtype,
                          op);
      });
}

absl::Status RingAllGather(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype) {
  return RingPass(
      ctx, ctx.size() - 1, 0, data, segments, DTypeSize(dtype),
      [&](uint32_t step, uint32_t chunk, char* target, size_t bytes) {
        return ctx.Recv(ctx.prev(), step, chunk, target, bytes);
      });
}

absl::Status RingAllReduce(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const size_t element = DTypeSize(dtype);
  // Steps [0, n-1) reduce; the last of them completes segment r, which steps
  // [n-1, 2(n-1)) share. Segment r - s - 1 goes out at step s in both.
  return RingPass(
      ctx, 2 * (n - 1), 1, data, segments, element,
      [&](uint32_t step, uint32_t chunk, char* target,
          size_t bytes) -> absl::Status {
        if (step >= static_cast<uint32_t>(n - 1)) {
          return ctx.Recv(ctx.prev(), step, chunk, target, bytes);
        }
        COHORT_RETURN_IF_ERROR(
            ReduceFrom(ctx, ctx.prev(), step, chunk, target, bytes, dtype, op));
        if (op == ReduceOp::kMean && step == static_cast<uint32_t>(n - 2)) {
          DivideForMean(target, bytes / element, dtype, n);
        }
        return absl::OkStatus();
      });
}

}  // namespace cohort::collective
