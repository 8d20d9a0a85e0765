#include "coordinator/closure_scheduler.h"

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

}  // namespace
}  // namespace cohort::coordinator
