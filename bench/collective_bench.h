#pragma once

// The measurement one rank runs for cohort-bench, with the method of the
// peer baselines (../shared/bench/peers): in-place float32, a correctness
// check, warm-up, a timed loop of about --min_seconds, per-iteration maximum
// over ranks, median; algbw = bytes / time, busbw = algbw * 2(n-1)/n for
// all-reduce (nccl-tests' factors for the others).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/communicator.h"

namespace cohort::bench {

enum class Collective { kAllReduce, kBroadcast, kAllGather };

struct BenchOptions {
  Collective collective = Collective::kAllReduce;
  std::vector<size_t> sizes;  // bytes per rank
  absl::Duration min_time = absl::Milliseconds(1500);
  int min_iterations = 10;
  int max_iterations = 2000;
};

struct BenchRow {
  size_t bytes = 0;
  int iterations = 0;
  // Per iteration: median and min of the slowest rank's times; mean of
  // rank 0's loop time.
  double median_us = 0, mean_us = 0, min_us = 0;
  double algbw_gbps = 0, busbw_gbps = 0;
  bool ok = false;
};

// Runs every size on this rank; every rank returns the same rows.
absl::StatusOr<std::vector<BenchRow>> RunBenchmark(
    collective::Communicator& comm, const BenchOptions& options);

absl::string_view CollectiveName(Collective collective);

}  // namespace cohort::bench
