#pragma once

// Reassembles the chunks of one Push stream into whole variable updates, and
// applies each to the store as soon as its bytes are complete: the chunks of
// a variable must tile [0, its byte size) exactly, in any order, without
// overlap.

#include <cstdint>
#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "cohort/v1/ps.pb.h"
#include "ps_client/byte_ranges.h"
#include "ps_server/variable_store.h"

namespace cohort::ps {

// One per Push stream. `store` is not owned and must outlive it. Not
// thread-safe: a stream's reads arrive one at a time.
class PushAssembler {
 public:
  // `max_chunk_bytes` bounds each chunk's data. The bytes buffered at once
  // are bounded by the shard's variable bytes: at most one pending copy of
  // each variable (RESOURCE_EXHAUSTED past that).
  PushAssembler(VariableStore* store, int64_t max_chunk_bytes);

  // The sender and the variables the push carries, from the stream's first
  // message. INVALID_ARGUMENT without a job id, or for a negative count;
  // PERMISSION_DENIED for a job the store does not admit.
  // A count of 0 is a sender that does not count (one built before the
  // field): its push is not checked against one.
  absl::Status Begin(const JobRef& job, const std::string& worker,
                     int64_t num_variables);

  // Takes one chunk (its data may be cleared) and applies its variable when
  // complete. INVALID_ARGUMENT for a malformed chunk (too big, wrong total,
  // out of range, overlapping, of a variable already applied),
  // FAILED_PRECONDITION for a variable created anew with another size during
  // the push, and the store's errors (NOT_FOUND, PERMISSION_DENIED) for a
  // variable the sender may not push.
  absl::Status Add(v1::TensorChunk* chunk);

  // The end of the stream: INVALID_ARGUMENT before Begin, naming a variable
  // whose bytes did not all arrive, or for fewer variables than Begin said.
  absl::Status End() const;

  // Variables updated so far.
  int applied() const { return applied_; }

 private:
  struct Pending {
    std::string bytes;                  // the variable's size, filled in
    ByteRanges ranges;                  // received
    int64_t received = 0;
  };

  // Pieces of one variable received apart from each other, at most.
  static constexpr int kMaxPushPieces = 1024;

  // Fails the chunk when [offset, end) overlaps bytes already received, or
  // would be more than kMaxPushPieces pieces apart.
  static absl::Status Claim(const std::string& name, int64_t offset,
                            int64_t end, Pending* pending);

  VariableStore* const store_;
  const int64_t max_chunk_bytes_;
  JobRef job_ = "";
  std::string worker_;
  bool begun_ = false;
  int64_t num_variables_ = 0;  // from Begin; 0: not counted
  std::map<std::string, Pending> pending_;
  absl::flat_hash_set<std::string> applied_names_;
  int64_t buffered_bytes_ = 0;
  int applied_ = 0;
};

}  // namespace cohort::ps
