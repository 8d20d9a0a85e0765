#pragma once

#include "absl/status/status.h"
#include "collective/algorithms/op_context.h"

namespace cohort::collective {

// Broadcast as a pipelined chain from `root` around the ring: each rank
// forwards chunk c to the next while chunk c+1 is on its way to it, so the
// time is one transfer of the data plus (n-1) chunk latencies.
absl::Status ChainBroadcast(const OpContext& ctx, char* data, size_t bytes,
                            int root);

}  // namespace cohort::collective
