#pragma once

// Ring algorithms (bandwidth-optimal: each rank sends and receives
// (n-1)/n of the data per phase). Rank r sends to r+1 and receives from
// r-1. The order in which contributions are added to a segment is fixed by
// the ring, so results are bitwise reproducible for a given group size.
//
// Segments travel in chunks, and the steps of a pass overlap: a chunk goes on
// to next as soon as it has arrived from prev (and been reduced), not when
// the whole step has. Only one chunk's latency separates the steps, which
// matters when a segment is a few chunks long.

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// After it, segment rank() of `data` (cut by `segments`) holds the reduction
// of that segment over all ranks (MEAN: still the sum). Other segments hold
// partial sums. Uses steps [0, n - 1).
absl::Status RingReduceScatter(const OpContext& ctx, char* data,
                               const Segments& segments, DType dtype,
                               ReduceOp op);

// Given that segment rank() of `data` is final on every rank, makes every
// segment final everywhere. Uses steps [0, n - 1).
absl::Status RingAllGather(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype);

// Reduce-scatter and all-gather as one pass: every rank ends with the
// reduction of `data` over all ranks (MEAN: divided once, before the result
// is shared, so that every rank has the same bits). Uses steps
// [0, 2(n - 1)).
absl::Status RingAllReduce(const OpContext& ctx, char* data,
                           const Segments& segments, DType dtype, ReduceOp op);

}  // namespace cohort::collective
