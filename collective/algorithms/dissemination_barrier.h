#pragma once

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"

namespace cohort::collective {

// Dissemination barrier: in round k every rank signals rank + 2^k and waits
// for rank - 2^k; after ceil(log2 n) rounds each rank has heard, directly
// or not, from all others.
absl::Status DisseminationBarrier(const OpContext& ctx);

}  // namespace cohort::collective
