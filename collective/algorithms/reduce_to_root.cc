#include "collective/algorithms/reduce_to_root.h"

#include <algorithm>

#include "collective/algorithms/pipelining.h"
#include "collective/reduce.h"

namespace cohort::collective {

absl::Status ReduceToRoot(const OpContext& ctx, char* data, size_t count,
                          DType dtype, ReduceOp op, int root) {
  const size_t element = DTypeSize(dtype);
  const size_t bytes = count * element;
  // Within the transport's window, so that a bounded transport never holds
  // more than the root takes.
  const size_t chunk = ChunkBytes(ctx, element);
  const size_t chunks = std::max<size_t>((bytes + chunk - 1) / chunk, 1);
  auto length = [&](size_t c) {
    return std::min(chunk, bytes - std::min(c * chunk, bytes));
  };
  if (ctx.rank() != root) {
    for (size_t c = 0; c < chunks; ++c) {
      absl::Status sent = ctx.Send(root, 0, static_cast<uint32_t>(c),
                                   data + c * chunk, length(c));
      if (!sent.ok()) return sent;
    }
    return absl::OkStatus();
  }
  // Chunk by chunk, every source in rank order: each sender is at most one
  // chunk ahead of what the root has taken.
  for (size_t c = 0; c < chunks; ++c) {
    for (int source = 0; source < ctx.size(); ++source) {
      if (source == root) continue;
      absl::StatusOr<absl::Cord> got =
          ctx.RecvCord(source, 0, static_cast<uint32_t>(c), length(c));
      if (!got.ok()) return got.status();
      Accumulate(data + c * chunk, *got, dtype, op);
    }
  }
  if (op == ReduceOp::kMean) DivideForMean(data, count, dtype, ctx.size());
  return absl::OkStatus();
}

}  // namespace cohort::collective
