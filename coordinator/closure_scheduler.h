#pragma once

// The ClusterCoordinator half of ParameterServer jobs: hands out step
// closures (step indices 0..steps-1) to the workers' executor slots,
// collects their results, and re-queues the closures of a worker that was
// lost. A closure completes at least once: one whose worker died after
// pushing its update but before reporting runs again, as in TF.
//
// Pure logic; not thread-safe (the job manager's mutex guards it).

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "cohort/v1/job.pb.h"

namespace cohort::coordinator {

class ClosureScheduler {
 public:
  // Picks up where `status` left off (its completed closures), so a
  // restored coordinator does not run completed closures again.
  ClosureScheduler(int64_t steps, const v1::JobStatus& status);

  // Records `completed` from `slot` ("worker:1/0"), then hands it up to
  // `want` closures. A result for a closure no longer assigned to that
  // slot (re-queued meanwhile) still counts as a completion. A slot runs
  // one closure at a time, so one it holds that is not among `completed`
  // was lost with a reply that never reached it: it is re-queued.
  v1::ClosureResponse Exchange(const std::string& slot,
                               const std::vector<v1::ClosureResult>& completed,
                               int want);

  // Re-queues the closures in flight on every slot of `task` ("worker:1").
  // Returns how many.
  int Requeue(const std::string& task);

  // Every closure completed, or a step called stop_training and the
  // closures in flight then have completed.
  bool done() const {
    return completed_count_ == steps_ ||
           (!stop_reason_.empty() && inflight_.empty());
  }
  int64_t completed() const { return completed_count_; }
  int64_t rerun() const { return rerun_; }
  // Completions per second over the recent past.
  double rate(absl::Time now);

  // Into `status`: step, completed set, recent results, re-run count, why
  // training stopped early, and
  // as the job's metrics each value from the highest closure that reported
  // it. Results arrive out of order (a slow worker's closure 499 may land
  // after closure 599), so arrival order would report a stale value.
  void Fill(v1::JobStatus& status) const;

 private:
  void Complete(const v1::ClosureResult& result);
  void NoteValues(const v1::ClosureResult& result);

  const int64_t steps_;
  int64_t next_ = 0;              // closures never handed out start here
  std::deque<int64_t> requeued_;  // handed out, lost, to run again
  std::map<int64_t, std::string> inflight_;  // closure -> slot
  std::set<int64_t> completed_beyond_;       // completed ids >= prefix_
  int64_t prefix_ = 0;                       // every id below it has completed
  int64_t completed_count_ = 0;
  int64_t rerun_ = 0;
  std::deque<v1::ClosureResult> recent_;
  struct Reported {
    int64_t closure;  // -1: restored, closure unknown
    double value;
  };
  std::map<std::string, Reported> metrics_;  // name -> latest by closure
  // For rate(): completions counted at the last sample.
  int64_t rate_count_ = 0;
  absl::Time rate_time_ = absl::InfinitePast();
  double rate_ = 0;
  // The first stop_training's reason; no closure starts after it.
  std::string stop_reason_;
};

}  // namespace cohort::coordinator
