#include "collective/algorithms/dissemination_barrier.h"

namespace cohort::collective {

absl::Status DisseminationBarrier(const OpContext& ctx) {
  const int n = ctx.size();
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const char token = 0;
    char received = 0;
    absl::Status status =
        ctx.Send((ctx.rank() + distance) % n, round, 0, &token, 1);
    if (status.ok()) {
      status =
          ctx.Recv((ctx.rank() - distance % n + n) % n, round, 0, &received, 1);
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
