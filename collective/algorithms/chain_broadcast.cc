#include "collective/algorithms/chain_broadcast.h"

#include <algorithm>

#include "collective/algorithms/pipelining.h"

namespace cohort::collective {

absl::Status ChainBroadcast(const OpContext& ctx, char* data, size_t bytes,
                            int root) {
  const int n = ctx.size();
  const int position = (ctx.rank() - root + n) % n;
  const bool receives = position != 0;
  const bool forwards = position != n - 1;
  const size_t chunk = ChunkBytes(ctx, 1);
  const size_t chunks = bytes / chunk + 1;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t at = std::min(c * chunk, bytes);
    const size_t len = std::min(chunk, bytes - at);
    if (len == 0 && c > 0) break;
    if (receives) {
      absl::Status status =
          ctx.Recv(ctx.prev(), 0, static_cast<uint32_t>(c), data + at, len);
      if (!status.ok()) return status;
    }
    if (forwards) {
      absl::Status status =
          ctx.Send(ctx.next(), 0, static_cast<uint32_t>(c), data + at, len);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::collective
