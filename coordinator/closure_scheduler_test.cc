#include "coordinator/closure_scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::coordinator {
namespace {

v1::ClosureResult Result(int64_t closure, double loss = 1.0) {
  v1::ClosureResult r;
  r.set_closure(closure);
  (*r.mutable_values())["loss"] = loss;
  return r;
}

std::vector<int64_t> Ids(const v1::ClosureResponse& response) {
  return {response.closures().begin(), response.closures().end()};
}

TEST(ClosureSchedulerTest, HandsOutEveryClosureOnceAndFinishes) {
  ClosureScheduler scheduler(3, v1::JobStatus());
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {}, 1)),
            std::vector<int64_t>{0});
  EXPECT_EQ(Ids(scheduler.Exchange("worker:1/0", {}, 1)),
            std::vector<int64_t>{1});
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {Result(0)}, 1)),
            std::vector<int64_t>{2});
  // Nothing left to hand out, but closures are in flight: ask again.
  v1::ClosureResponse wait = scheduler.Exchange("worker:0/0", {Result(2)}, 1);
  EXPECT_TRUE(wait.closures().empty());
  EXPECT_FALSE(wait.done());
  EXPECT_GT(wait.retry_after_ms(), 0);
  EXPECT_TRUE(scheduler.Exchange("worker:1/0", {Result(1, 0.5)}, 1).done());
  EXPECT_TRUE(scheduler.done());

  v1::JobStatus status;
  scheduler.Fill(status);
  EXPECT_EQ(status.step(), 3);
  EXPECT_EQ(status.completed_prefix(), 3);
  EXPECT_EQ(status.recent_results_size(), 3);
  // Closure 1 reported last, but closure 2 is the later step.
  EXPECT_EQ(status.metrics().at("loss"), 1.0);
}

TEST(ClosureSchedulerTest,
     StopTrainingStartsNothingNewAndEndsWhenInFlightOnesDo) {
  ClosureScheduler scheduler(100, v1::JobStatus());
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {}, 2)),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Ids(scheduler.Exchange("worker:1/0", {}, 1)),
            std::vector<int64_t>{2});
  v1::ClosureResult stop = Result(0);
  stop.set_stop_reason("closure 0 called stop_training: converged");
  // worker:0/0 still runs closure 1; worker:1/0 runs closure 2.
  v1::ClosureResponse after = scheduler.Exchange("worker:0/0", {stop}, 2);
  EXPECT_TRUE(after.closures().empty());
  EXPECT_FALSE(scheduler.done());
  // A lost closure is not run again after the stop.
  EXPECT_EQ(scheduler.Requeue("worker:1"), 1);
  EXPECT_TRUE(scheduler.Exchange("worker:0/0", {Result(1)}, 2).done());

  v1::JobStatus status;
  scheduler.Fill(status);
  EXPECT_EQ(status.step(), 2);
  EXPECT_EQ(status.stopped_at_step(), 2);
  EXPECT_EQ(status.stop_reason(), "closure 0 called stop_training: converged");
  // A restored coordinator still starts nothing.
  ClosureScheduler restored(100, status);
  EXPECT_TRUE(restored.done());
  EXPECT_TRUE(restored.Exchange("worker:0/0", {}, 1).closures().empty());
}

TEST(ClosureSchedulerTest, EachMetricComesFromTheHighestClosureReportingIt) {
  ClosureScheduler scheduler(600, v1::JobStatus());
  v1::ClosureResult late_eval = Result(499, 0.4);
  (*late_eval.mutable_values())["accuracy"] = 0.92;
  v1::ClosureResult last_eval = Result(599, 0.1);
  (*last_eval.mutable_values())["accuracy"] = 0.97;
  // A slow worker's closure 499 lands after 599 and after 598, which
  // reports no accuracy at all.
  scheduler.Exchange("worker:1/0", {last_eval, Result(598, 0.2)}, 0);
  scheduler.Exchange("worker:0/0", {late_eval}, 0);
  v1::JobStatus status;
  scheduler.Fill(status);
  EXPECT_EQ(status.metrics().at("accuracy"), 0.97);
  EXPECT_EQ(status.metrics().at("loss"), 0.1);

  // A restored scheduler keeps them, and a later closure still wins.
  ClosureScheduler restored(600, status);
  v1::JobStatus again;
  restored.Fill(again);
  EXPECT_EQ(again.metrics().at("accuracy"), 0.97);
  EXPECT_EQ(again.metrics().at("loss"), 0.1);
  restored.Exchange("worker:0/0", {Result(300, 0.9)}, 0);
  restored.Fill(again);
  EXPECT_EQ(again.metrics().at("loss"), 0.1);
}

TEST(ClosureSchedulerTest, ALostWorkersClosuresRunAgainElsewhere) {
  ClosureScheduler scheduler(4, v1::JobStatus());
  scheduler.Exchange("worker:0/0", {}, 1);  // 0
  scheduler.Exchange("worker:0/1", {}, 1);  // 1
  scheduler.Exchange("worker:1/0", {}, 1);  // 2
  EXPECT_EQ(scheduler.Requeue("worker:0"), 2);
  EXPECT_EQ(scheduler.rerun(), 2);
  EXPECT_EQ(Ids(scheduler.Exchange("worker:1/0", {Result(2)}, 1)),
            std::vector<int64_t>{0});
  EXPECT_EQ(Ids(scheduler.Exchange("worker:1/0", {Result(0)}, 1)),
            std::vector<int64_t>{1});
  EXPECT_EQ(Ids(scheduler.Exchange("worker:1/0", {Result(1)}, 1)),
            std::vector<int64_t>{3});
  // A late result from the lost worker counts once.
  scheduler.Exchange("worker:0/0", {Result(0)}, 0);
  EXPECT_EQ(scheduler.completed(), 3);
  EXPECT_TRUE(scheduler.Exchange("worker:1/0", {Result(3)}, 1).done());
}

TEST(ClosureSchedulerTest, AClosureWhoseReplyWasLostRunsAgain) {
  ClosureScheduler scheduler(3, v1::JobStatus());
  scheduler.Exchange("worker:0/0", {}, 1);  // 0, its reply lost
  // The executor asks again without a result: 0 is not stranded.
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {}, 1)),
            std::vector<int64_t>{0});
  EXPECT_EQ(scheduler.rerun(), 1);
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {Result(0)}, 1)),
            std::vector<int64_t>{1});
}

TEST(ClosureSchedulerTest, ARestoredTableSkipsCompletedClosures) {
  v1::JobStatus saved;
  saved.set_completed_prefix(2);
  saved.add_completed_beyond(3);
  ClosureScheduler scheduler(5, saved);
  EXPECT_EQ(scheduler.completed(), 3);
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/0", {}, 1)),
            std::vector<int64_t>{2});
  EXPECT_EQ(Ids(scheduler.Exchange("worker:0/1", {}, 1)),
            std::vector<int64_t>{4});
}

// --- schedule_from_client jobs.

v1::JobStatus ScheduledJob() {
  v1::JobStatus status;
  status.mutable_spec()->mutable_ps()->set_schedule_from_client(true);
  return status;
}

v1::ScheduledCall Call(const std::string& fn, bool takes_batch = false,
                       std::vector<double> args = {}) {
  v1::ScheduledCall call;
  call.set_fn(fn);
  call.set_takes_batch(takes_batch);
  call.mutable_args()->Add(args.begin(), args.end());
  return call;
}

// Schedules `calls` and releases them, as the job service does once they
// are saved.
absl::StatusOr<std::vector<int64_t>> ScheduleAndSave(
    ClosureScheduler& scheduler, std::vector<v1::ScheduledCall> calls) {
  absl::StatusOr<std::vector<int64_t>> ids =
      scheduler.Schedule(std::move(calls));
  if (ids.ok()) scheduler.Release();
  return ids;
}

TEST(ClosureSchedulerTest, ScheduledCallsGetIdsAndOnlyBatchTakersGetBatches) {
  ClosureScheduler scheduler(0, ScheduledJob());
  EXPECT_FALSE(scheduler.done());  // the client may schedule more
  absl::StatusOr<std::vector<int64_t>> ids = ScheduleAndSave(
      scheduler,
      {Call("train", true), Call("eval", false, {100}), Call("train", true)});
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int64_t>{0, 1, 2}));
  v1::ClosureResponse response = scheduler.Exchange("worker:0/0", {}, 1);
  ASSERT_EQ(response.calls_size(), 1);
  EXPECT_EQ(response.calls(0).fn(), "train");
  EXPECT_EQ(response.calls(0).batch(), 0);
  response = scheduler.Exchange("worker:1/0", {}, 1);
  EXPECT_EQ(response.calls(0).fn(), "eval");
  EXPECT_EQ(response.calls(0).batch(), -1);
  EXPECT_EQ(response.calls(0).args(0), 100);
  EXPECT_EQ(scheduler.Call(1)->state(), v1::CallStatus::RUNNING);
  EXPECT_EQ(scheduler.Call(2)->state(), v1::CallStatus::QUEUED);
  EXPECT_EQ(scheduler.Exchange("worker:0/0", {Result(0)}, 1).calls(0).batch(),
            1);
  EXPECT_EQ(scheduler.Call(0)->state(), v1::CallStatus::DONE);
  EXPECT_EQ(scheduler.Call(0)->result().values().at("loss"), 1.0);
  EXPECT_FALSE(scheduler.Call(3).ok());
  EXPECT_FALSE(scheduler.Call(-1).ok());
}

TEST(ClosureSchedulerTest, CallsWaitForTheirSaveAndAFailedSaveTakesThemBack) {
  ClosureScheduler scheduler(0, ScheduledJob());
  ASSERT_TRUE(scheduler.Schedule({Call("train", true), Call("eval")}).ok());
  EXPECT_EQ(scheduler.Exchange("worker:0/0", {}, 2).closures_size(), 0);
  EXPECT_EQ(scheduler.Schedule({Call("f")}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  scheduler.Retract();
  EXPECT_FALSE(scheduler.Call(0).ok());
  v1::GetCallsResponse counts;
  scheduler.FillCounts(counts);
  EXPECT_EQ(counts.scheduled(), 0);

  // The client schedules them again: the same ids and batches, once each.
  absl::StatusOr<std::vector<int64_t>> again =
      scheduler.Schedule({Call("train", true), Call("eval")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, (std::vector<int64_t>{0, 1}));
  scheduler.Release();
  v1::ClosureResponse response = scheduler.Exchange("worker:0/0", {}, 3);
  ASSERT_EQ(response.calls_size(), 2);
  EXPECT_EQ(response.calls(0).batch(), 0);
  EXPECT_EQ(response.calls(1).batch(), -1);
}

TEST(ClosureSchedulerTest, AScheduledJobIsDoneOnceFinishedAndEveryCallRan) {
  ClosureScheduler scheduler(0, ScheduledJob());
  ASSERT_TRUE(ScheduleAndSave(scheduler, {Call("f")}).ok());
  scheduler.Exchange("worker:0/0", {}, 1);
  scheduler.Exchange("worker:0/0", {Result(0)}, 0);
  EXPECT_FALSE(scheduler.done());
  EXPECT_TRUE(scheduler.idle());
  scheduler.FinishScheduling();
  EXPECT_TRUE(scheduler.done());
  absl::StatusOr<std::vector<int64_t>> late =
      ScheduleAndSave(scheduler, {Call("f")});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ClosureSchedulerTest, AFailedCallIsDoneWithItsErrorAndTheFirstIsKept) {
  ClosureScheduler scheduler(0, ScheduledJob());
  ASSERT_TRUE(
      ScheduleAndSave(scheduler, {Call("f"), Call("g"), Call("h")}).ok());
  v1::ClosureResult bad = Result(1);
  bad.set_error("NOT_FOUND: no step function named \"g\"");
  v1::ClosureResult worse = Result(2);
  worse.set_error("INTERNAL: h broke");
  scheduler.Exchange("worker:0/0", {Result(0), bad, worse}, 0);
  EXPECT_EQ(scheduler.Call(1)->state(), v1::CallStatus::FAILED);
  v1::GetCallsResponse counts;
  scheduler.FillCounts(counts);
  EXPECT_EQ(counts.scheduled(), 3);
  EXPECT_EQ(counts.completed(), 3);
  EXPECT_EQ(counts.failed(), 2);
  EXPECT_EQ(counts.first_failed(), 1);
  EXPECT_EQ(counts.first_error(), bad.error());
}

TEST(ClosureSchedulerTest, ARestoredSchedulerStillReportsTheFailures) {
  ClosureScheduler scheduler(0, ScheduledJob());
  ASSERT_TRUE(
      ScheduleAndSave(scheduler, {Call("f"), Call("g"), Call("h")}).ok());
  v1::ClosureResult first = Result(0);
  first.set_error("INTERNAL: f broke");
  v1::ClosureResult newest = Result(2);
  newest.set_error("INTERNAL: h broke");
  scheduler.Exchange("worker:0/0", {first, Result(1), newest}, 0);
  v1::JobStatus saved = ScheduledJob();
  scheduler.Fill(saved);

  ClosureScheduler restored(0, saved);
  v1::GetCallsResponse counts;
  restored.FillCounts(counts);
  EXPECT_EQ(counts.failed(), 2);
  EXPECT_EQ(counts.first_failed(), 0);
  EXPECT_EQ(counts.first_error(), first.error());
  EXPECT_EQ(counts.last_failed(), 2);
  EXPECT_EQ(counts.last_error(), newest.error());
}

TEST(ClosureSchedulerTest, ScheduleRefusesBadCallsAndAFullQueueAsAWhole) {
  ClosureScheduler scheduler(0, ScheduledJob());
  EXPECT_EQ(ScheduleAndSave(scheduler, {Call("")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<double> many(ClosureScheduler::kMaxArgs + 1);
  EXPECT_EQ(
      ScheduleAndSave(scheduler, {Call("f", false, many)}).status().code(),
      absl::StatusCode::kInvalidArgument);
  const absl::Status long_name =
      ScheduleAndSave(scheduler, {Call("f"), Call(std::string(4097, 'f'))})
          .status();
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_name.message()),
              ::testing::HasSubstr("call 1 names a function of 4097 bytes; at "
                                   "most 4096"));
  std::vector<v1::ScheduledCall> full(ClosureScheduler::kMaxPendingCalls,
                                      Call("f"));
  ASSERT_TRUE(ScheduleAndSave(scheduler, full).ok());
  EXPECT_EQ(ScheduleAndSave(scheduler, {Call("f")}).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Nothing of a refused request was queued.
  v1::GetCallsResponse counts;
  scheduler.FillCounts(counts);
  EXPECT_EQ(counts.scheduled(), ClosureScheduler::kMaxPendingCalls);

  // The args the saved status would carry are bounded too.
  ClosureScheduler heavy(0, ScheduledJob());
  const std::vector<double> most(ClosureScheduler::kMaxArgs);
  const size_t fit = ClosureScheduler::kMaxPendingArgs / most.size();
  std::vector<v1::ScheduledCall> calls(fit, Call("f", false, most));
  ASSERT_TRUE(ScheduleAndSave(heavy, calls).ok());
  EXPECT_EQ(ScheduleAndSave(heavy, {Call("f", false, {1})}).status().code(),
            absl::StatusCode::kResourceExhausted);

  ClosureScheduler own_steps(5, v1::JobStatus());
  EXPECT_EQ(ScheduleAndSave(own_steps, {Call("f")}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ClosureSchedulerTest, ARestoredSchedulerHandsOutTheCallsNotCompleted) {
  ClosureScheduler scheduler(0, ScheduledJob());
  ASSERT_TRUE(
      ScheduleAndSave(scheduler, {Call("train", true), Call("eval", false, {7}),
                                  Call("train", true)})
          .ok());
  scheduler.Exchange("worker:0/0", {}, 1);           // 0 runs...
  scheduler.Exchange("worker:0/0", {Result(0)}, 0);  // ...and completes
  scheduler.Exchange("worker:0/0", {}, 1);  // 1 is in flight when saved
  v1::JobStatus saved = ScheduledJob();
  scheduler.Fill(saved);
  EXPECT_EQ(saved.pending_calls_size(), 2);

  ClosureScheduler restored(0, saved);
  v1::ClosureResponse first = restored.Exchange("worker:1/0", {}, 1);
  ASSERT_EQ(first.calls_size(), 1);
  EXPECT_EQ(first.calls(0).id(), 1);
  EXPECT_EQ(first.calls(0).args(0), 7);
  v1::ClosureResponse second = restored.Exchange("worker:1/1", {}, 1);
  EXPECT_EQ(second.calls(0).id(), 2);
  EXPECT_EQ(second.calls(0).batch(), 1);
  // Numbering goes on where it stopped.
  EXPECT_EQ(ScheduleAndSave(restored, {Call("train", true)})->front(), 3);
  EXPECT_EQ(restored.Exchange("worker:1/2", {}, 1).calls(0).batch(), 2);
  // Completed before the restart: done, its result not held.
  EXPECT_EQ(restored.Call(0)->state(), v1::CallStatus::DONE_RESULT_DROPPED);
}

}  // namespace
}  // namespace cohort::coordinator
