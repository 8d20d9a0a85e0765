#pragma once

// Ring algorithms (bandwidth-optimal: each rank sends and receives
// (n-1)/n of the data per phase). Rank r sends to r+1 and receives from
// r-1. The order in which contributions are added to a segment is fixed by
// the ring, so results are bitwise reproducible for a given group size.

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// After it, segment rank() of `data` (cut by `segments`) holds the reduction
// of that segment over all ranks (MEAN: still the sum). Other segments hold
// partial sums. Uses steps [first_step, first_step + n - 1).
absl::Status RingReduceScatter(const OpContext& ctx, char* data,
                               const Segments& segments, DType dtype,
                               ReduceOp op, uint32_t first_step);

// Given that segment rank() of `data` is final on every rank, makes every
// segment final everywhere. Uses steps [first_step, first_step + n - 1).
absl::Status RingAllGather(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype,
                           uint32_t first_step);

}  // namespace cohort::collective
