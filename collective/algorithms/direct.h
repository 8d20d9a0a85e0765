#pragma once

// Direct all-reduce: a reduce-scatter and an all-gather in which every rank
// exchanges with every other at once, instead of passing data round the
// ring. Each rank sends and receives exactly what it would in the ring,
// 2(n - 1)/n of the buffer, in 2 steps instead of 2(n - 1); the steps'
// messages wait on nothing but their own arrival, which is what ranks
// sharing few cores, or a network with a long round trip, need.
//
// The owner of each segment adds the contributions in the ring's order, with
// the ring's rounding, so the result is the ring's, bit for bit: a job gives
// the same variables whichever of the two its layout chose.

#include <cstddef>

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// Whether an all-reduce of `bytes` among `size` ranks takes the direct path
// where the transport favours it: from 3 ranks (between 2 it is the ring)
// to 16 (beyond, as many streams at once, each carrying a sixteenth of the
// buffer or less), and while the buffer is under 512 KiB per rank (its
// segments about that or less). Between 4 test hosts the direct path led
// the ring by a third or more at 512 KiB and 1 MiB and by 12% at 1.5 MiB,
// trailed it by 3-5% at 2 MiB and by more beyond, where the ring's one
// stream each way moves the bytes more cheaply (bench/RESULTS.md,
// thirteenth pass).
bool DirectFits(int size, size_t bytes);

// Reduces `count` elements of `data` over all ranks, in place, with the
// same bits as RingAllReduce over `segments` (MEAN: divided once by the
// owner). Uses steps 0 (reduce-scatter) and 1 (all-gather).
absl::Status DirectAllReduce(const OpContext& ctx, char* data,
                             const Segments& segments, DType dtype,
                             ReduceOp op);

}  // namespace cohort::collective
