#include "collective/algorithms/halving_doubling.h"

#include <algorithm>
#include <vector>

#include "collective/algorithms/pipelining.h"
#include "collective/reduce.h"
#include "common/status_macros.h"

namespace cohort::collective {

namespace {

// A contiguous run of elements of the buffer.
struct Region {
  size_t offset = 0;  // in elements
  size_t length = 0;
};

// Sends `out` to `peer` and receives the peer's `in`, chunk by chunk, both
// tagged `step`; `receive(chunk, target, bytes)` takes each incoming chunk.
// Sends run up to `window` chunks ahead of receives: both ranks of the pair
// send first, within the transport's window, so neither waits on the other.
template <typename Receive>
absl::Status Exchange(const OpContext& ctx, int peer, uint32_t step, char* data,
                      Region out, Region in, size_t element, Receive receive) {
  const size_t chunk = ChunkBytes(ctx, element);
  const size_t window = std::max<size_t>(WindowBytes(ctx) / chunk, 1);
  const size_t out_bytes = out.length * element;
  const size_t in_bytes = in.length * element;
  // At least one (possibly empty) chunk each way, so that the signature is
  // checked even for an empty region.
  auto chunks = [&](size_t bytes) {
    return std::max<size_t>((bytes + chunk - 1) / chunk, 1);
  };
  const size_t out_chunks = chunks(out_bytes);
  const size_t in_chunks = chunks(in_bytes);
  const bool lend = out_bytes <= kMaxLentSegmentBytes;
  size_t sent = 0;
  auto send_next = [&]() -> absl::Status {
    const size_t at = std::min(sent * chunk, out_bytes);
    const char* from = data + out.offset * element + at;
    const size_t bytes = std::min(chunk, out_bytes - at);
    const auto index = static_cast<uint32_t>(sent++);
    return lend ? ctx.SendLent(peer, step, index, from, bytes)
                : ctx.Send(peer, step, index, from, bytes);
  };
  for (size_t received = 0; received < in_chunks; ++received) {
    while (sent < out_chunks && sent < received + window) {
      COHORT_RETURN_IF_ERROR(send_next());
    }
    const size_t at = std::min(received * chunk, in_bytes);
    COHORT_RETURN_IF_ERROR(receive(static_cast<uint32_t>(received),
                                   data + in.offset * element + at,
                                   std::min(chunk, in_bytes - at)));
  }
  while (sent < out_chunks) COHORT_RETURN_IF_ERROR(send_next());
  return absl::OkStatus();
}

absl::Status Run(const OpContext& ctx, char* data, size_t count, DType dtype,
                 ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t element = DTypeSize(dtype);
  // Halving: at each level the partner is the rank whose number differs in
  // one bit, nearest first; of the region both hold, the rank with the bit
  // clear keeps the lower half and the other the upper.
  std::vector<Region> held{{0, count}};
  uint32_t step = 0;
  for (int distance = 1; distance < n; distance <<= 1, ++step) {
    const Region whole = held.back();
    const Region lower{whole.offset, whole.length / 2};
    const Region upper{whole.offset + lower.length,
                       whole.length - lower.length};
    const bool keep_lower = (r & distance) == 0;
    const Region kept = keep_lower ? lower : upper;
    const Region given = keep_lower ? upper : lower;
    COHORT_RETURN_IF_ERROR(
        Exchange(ctx, r ^ distance, step, data, given, kept, element,
                 [&](uint32_t chunk, char* target, size_t bytes) {
                   return ReduceFrom(ctx, r ^ distance, step, chunk, target,
                                     bytes, dtype, op);
                 }));
    held.push_back(kept);
  }
  if (op == ReduceOp::kMean) {
    const Region mine = held.back();
    DivideForMean(data + mine.offset * element, mine.length, dtype, n);
  }
  // Doubling: the same pairs in reverse, each sending what it holds whole
  // and receiving the other half of the region one level up.
  for (int distance = n >> 1; distance >= 1; distance >>= 1, ++step) {
    const Region mine = held.back();
    held.pop_back();
    const Region whole = held.back();
    const Region other{
        mine.offset == whole.offset ? mine.offset + mine.length : whole.offset,
        whole.length - mine.length};
    const int peer = r ^ distance;
    COHORT_RETURN_IF_ERROR(
        Exchange(ctx, peer, step, data, mine, other, element,
                 [&](uint32_t chunk, char* target, size_t bytes) {
                   return ctx.Recv(peer, step, chunk, target, bytes);
                 }));
  }
  return absl::OkStatus();
}

}  // namespace

bool HalvingDoublingFits(int size) {
  return size > 2 && (size & (size - 1)) == 0;
}

absl::Status HalvingDoublingAllReduce(const OpContext& ctx, char* data,
                                      size_t count, DType dtype, ReduceOp op) {
  // Lending is safe: a region sent while halving is written again only
  // while doubling, on receiving from the same peer what that peer sends
  // after it has received the whole region; a region sent while doubling is
  // final. Only the last sends can be in flight at the end.
  return ReclaimingLent(ctx, Run(ctx, data, count, dtype, op));
}

}  // namespace cohort::collective
