#pragma once

// The ClusterCoordinator half of ParameterServer jobs: hands out step
// closures (step indices 0..steps-1) to the workers' executor slots,
// collects their results, and re-queues the closures of a worker that was
// lost. A closure completes at least once: one whose worker died after
// pushing its update but before reporting runs again, as in TF.
//
// A schedule_from_client job has no steps of its own: its closures are the
// calls the client schedules (ids 0, 1, ... in schedule order), each with
// its function and arguments, and it is done once the client finished
// scheduling and every call completed. The scheduler keeps each call's
// result, for the client to fetch, and the calls not yet completed, which
// Fill() saves so that a restored coordinator hands them out again.
//
// Pure logic; not thread-safe (the job manager's mutex guards it).

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

  // --- schedule_from_client jobs.
  bool client_scheduled() const { return client_scheduled_; }
  // Queues `calls` (fn, args, takes_batch) and returns their ids. They are
  // held, not handed out, until Release(): the client is told they were
  // accepted only once they are saved, and a failed save takes them back
  // (Retract), so that the client's retry does not run them twice.
  // FAILED_PRECONDITION when the job takes no calls (not client-scheduled,
  // finished scheduling, stopped training) or calls are held already,
  // INVALID_ARGUMENT naming a bad call, RESOURCE_EXHAUSTED when more than
  // kMaxPendingCalls would be left not completed. All or nothing.
  absl::StatusOr<std::vector<int64_t>> Schedule(
      std::vector<v1::ScheduledCall> calls);
  // The held calls were saved: they may be handed out.
  void Release() {
    released_ = steps_;
    batches_released_ = batches_;
  }
  // The held calls could not be saved: forgotten, as if never scheduled.
  // (Fill saves held calls too, so a save by someone else that preceded
  // the failed one has them on disk until the next save.)
  void Retract();
  // No more calls: done() once the scheduled ones completed.
  void FinishScheduling() { scheduling_finished_ = true; }
  // Where call `id` is; INVALID_ARGUMENT for an id never scheduled.
  absl::StatusOr<v1::CallStatus> Call(int64_t id) const;
  // Counts and the first failure, into `response`.
  void FillCounts(v1::GetCallsResponse& response) const;

  static constexpr int64_t kMaxPendingCalls = 4096;
  static constexpr size_t kMaxArgs = 4096;
  // The args of the calls not yet completed, which the job's saved status
  // carries: 8 MiB.
  static constexpr int64_t kMaxPendingArgs = 1 << 20;
  static constexpr size_t kKeptResults = 100000;

  // Re-queues the closures in flight on every slot of `task` ("worker:1").
  // Returns how many.
  int Requeue(const std::string& task);
  // Re-queues every closure in flight, as a new attempt starts.
  int RequeueAll();
  // Nothing queued or in flight.
  bool idle() const {
    return inflight_.empty() && requeued_.empty() && next_ >= steps_;
  }

  // Every closure completed, or a step called stop_training and the
  // closures in flight then have completed.
  bool done() const {
    return (completed_count_ == steps_ &&
            (!client_scheduled_ || scheduling_finished_)) ||
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

  const bool client_scheduled_;
  int64_t steps_;     // client-scheduled: the calls scheduled so far
  int64_t next_ = 0;  // closures never handed out start here
  std::deque<int64_t> requeued_;             // handed out, lost, to run again
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

  // --- schedule_from_client jobs.
  std::map<int64_t, v1::ScheduledCall> calls_;    // scheduled, not completed
  std::map<int64_t, v1::ClosureResult> results_;  // the newest kKeptResults
  int64_t batches_ = 0;  // batch indices handed to calls so far
  // Calls [released_, steps_) are held by Schedule until saved;
  // batches_released_ is batches_ as of released_.
  int64_t released_ = 0;
  int64_t batches_released_ = 0;
  bool scheduling_finished_ = false;
  int64_t failed_ = 0;
  int64_t first_failed_ = -1;
  std::string first_error_;
  int64_t last_failed_ = -1;
  std::string last_error_;
};

}  // namespace cohort::coordinator
