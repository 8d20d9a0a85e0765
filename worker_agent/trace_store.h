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
  // Attempts kept per job; the oldest goes when a newer one starts, so that
  // a job restarted many times holds no more than this many attempts' spans.
  static constexpr size_t kAttemptsKept = 3;

  static TraceStore& Default();

  // A recorder for one replica of one attempt, kept under the job:
  // `job_uid` (JobStatus.uid) tells it from another cluster's job of the
  // same id.
  std::shared_ptr<TraceRecorder> NewRecorder(const std::string& job_id,
                                             const std::string& job_uid,
                                             int attempt, int replica,
                                             size_t capacity);

  // The job's spans on this agent, every attempt kept, labelled with
  // `task`; an empty `job_uid` means the newest job of that id. NOT_FOUND
  // when none were recorded here (or they were pushed out).
  absl::StatusOr<v1::TraceData> Get(const std::string& job_id,
                                    const std::string& job_uid,
                                    const std::string& task) const;

 private:
  struct Replica {
    int attempt;
    int replica;
    std::shared_ptr<TraceRecorder> recorder;
  };
  struct Job {
    std::string id;
    std::string uid;
    std::vector<Replica> replicas;  // by attempt, oldest first
  };
  mutable absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace cohort::agent
