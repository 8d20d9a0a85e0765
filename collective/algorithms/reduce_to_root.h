#pragma once

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"
#include "collective/types.h"

namespace cohort::collective {

// Reduction to one rank (TF's ReductionToOneDevice, first half): every
// other rank sends its buffer to `root`, chunk by chunk, and the root adds
// them to its own in rank order, so the result is deterministic. Only the
// root's `data` changes; MEAN divides there once. Uses step 0.
absl::Status ReduceToRoot(const OpContext& ctx, char* data, size_t count,
                          DType dtype, ReduceOp op, int root);

}  // namespace cohort::collective
