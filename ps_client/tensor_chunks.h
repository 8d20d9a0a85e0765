#pragma once

// The client half of the ParameterServer wire format: cutting a worker's
// buffers into TensorChunks for Push, and putting Pull's chunks back into the
// worker's buffers. Pure logic over proto messages, so that it is tested
// without a server.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cohort/v1/ps.pb.h"
#include "ps_client/byte_ranges.h"

namespace cohort::ps {

// One stored variable (or part) and the caller's bytes for it. The span is
// not owned.
struct PushSlice {
  std::string name;
  absl::Span<const char> bytes;
};
struct PullSlice {
  std::string name;
  absl::Span<char> bytes;
};

// Yields the PushRequests of one Push stream: each carries at most
// `max_chunk_bytes` of data, small slices share a message, a large slice is
// cut into chunks; the first message carries `job_id`, `job_uid`, `worker`,
// the `incarnation` the push is meant for (0: any) and the number of slices. A
// slice of no bytes still sends one empty chunk, so that the shard sees it. The
// slices must outlive the chunker. Not thread-safe.
class PushChunker {
 public:
  PushChunker(const std::vector<PushSlice>* slices, int64_t max_chunk_bytes,
              std::string job_id, std::string job_uid, std::string worker,
              uint64_t incarnation);

  // Fills `request` with the next message; false when there is none left.
  bool Next(v1::PushRequest* request);
  // No message left after the one Next() just gave.
  bool Done() const { return slice_ >= slices_->size(); }

 private:
  const std::vector<PushSlice>* const slices_;
  const int64_t max_chunk_bytes_;
  const std::string job_id_;
  const std::string job_uid_;
  const std::string worker_;
  const uint64_t incarnation_;
  bool first_ = true;
  size_t slice_ = 0;    // the slice being sent
  int64_t offset_ = 0;  // bytes of it already sent
};

// Collects one Pull stream's chunks into the caller's buffers and checks
// that each buffer was filled exactly once over. The buffers are not owned.
// Not thread-safe.
class PullAssembler {
 public:
  explicit PullAssembler(std::vector<PullSlice> slices);

  // Copies `chunk` into place. INTERNAL, naming the variable, for a chunk of
  // a name not asked for, of the wrong total size, out of range, or
  // overlapping bytes an earlier chunk wrote.
  absl::Status Add(const v1::TensorChunk& chunk);

  // INTERNAL, naming the variable, unless every buffer got all its bytes.
  absl::Status Finish() const;

 private:
  struct Target {
    PullSlice slice;
    int64_t received = 0;
    ByteRanges filled;
  };
  std::vector<Target> targets_;
  // Each name's target: a shard may hold tens of thousands of variables.
  absl::flat_hash_map<std::string, size_t> index_;
};

}  // namespace cohort::ps
