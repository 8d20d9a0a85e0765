#pragma once

// The spans this agent's replicas recorded for traced jobs
// (JobSpec.trace_steps), kept for Agent.GetTrace while a job runs and after
// it ended, until newer traced jobs push it out.

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cohort/v1/trace.pb.h"
#include "common/trace.h"

namespace cohort::agent {

// How many spans a replica keeps for `trace_steps` traced steps: a step has
// a handful, plus one per collective its step function runs.
size_t TraceCapacity(int64_t trace_steps);

// Thread-safe.
class TraceStore {
 public:
  // Traced jobs kept; the oldest goes when a newer one starts.
  static constexpr size_t kJobsKept = 4;

  static TraceStore& Default();

  // A recorder for one replica of one attempt, kept under the job.
  std::shared_ptr<TraceRecorder> NewRecorder(const std::string& job_id,
                                             int attempt, int replica,
                                             size_t capacity);

  // The job's spans on this agent, every attempt, labelled with `task`;
  // NOT_FOUND when none were recorded here (or they were pushed out).
  absl::StatusOr<v1::TraceData> Get(const std::string& job_id,
                                    const std::string& task) const;

 private:
  struct Replica {
    int attempt;
    int replica;
    std::shared_ptr<TraceRecorder> recorder;
  };
  mutable absl::Mutex mu_;
  // Oldest first.
  std::deque<std::pair<std::string, std::vector<Replica>>> jobs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::agent
