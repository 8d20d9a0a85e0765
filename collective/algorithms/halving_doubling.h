#pragma once

// Halving-doubling all-reduce (Rabenseifner's) for a power-of-two group:
// a reduce-scatter by recursive halving, then an all-gather by recursive
// doubling. Each rank sends and receives as much as in the ring, in
// 2 log2(n) steps instead of 2(n - 1), and each step is an exchange between
// two ranks that waits on no other: pairs progress independently, which is
// what ranks sharing few cores need.

#include <cstddef>

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// Whether the group's size suits halving-doubling: a power of two above 2
// (between 2 ranks it is the ring).
bool HalvingDoublingFits(int size);

// Reduces `count` elements of `data` over all ranks, in place. Each element
// is reduced once, by the rank that owns it after the halving, in an order
// fixed by the group's size, and then copied to every rank: every rank ends
// with the same bits. MEAN divides once, before the doubling. Uses steps
// [0, 2 log2(n)).
absl::Status HalvingDoublingAllReduce(const OpContext& ctx, char* data,
                                      size_t count, DType dtype, ReduceOp op);

}  // namespace cohort::collective
