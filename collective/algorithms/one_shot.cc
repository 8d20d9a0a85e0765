#include "collective/algorithms/one_shot.h"

#include <vector>

#include "collective/reduce.h"

namespace cohort::collective {

absl::Status OneShotAllReduce(const OpContext& ctx, char* data, size_t count,
                              DType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  const size_t bytes = count * DTypeSize(dtype);
  // Peers in ring order from next on, so that no two ranks send to the
  // same peer first.
  for (int i = 1; i < n; ++i) {
    if (absl::Status s = ctx.Send((r + i) % n, 0, 0, data, bytes); !s.ok()) {
      return s;
    }
  }
  // `data` becomes rank 0's contribution, then accumulates the others in
  // rank order; this rank's own is kept aside first.
  const std::vector<char> mine(data, data + (r == 0 ? 0 : bytes));
  if (r != 0) {
    if (absl::Status s = ctx.Recv(0, 0, 0, data, bytes); !s.ok()) return s;
  }
  for (int source = 1; source < n; ++source) {
    if (source == r) {
      Accumulate(data, mine.data(), count, dtype, op);
      continue;
    }
    absl::StatusOr<absl::Cord> got = ctx.RecvCord(source, 0, 0, bytes);
    if (!got.ok()) return got.status();
    Accumulate(data, *got, dtype, op);
  }
  if (op == ReduceOp::kMean) DivideForMean(data, count, dtype, n);
  return absl::OkStatus();
}

}  // namespace cohort::collective
