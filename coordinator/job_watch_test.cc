// What a job watch counts as news (proto/job_state.h's JobStatusChanged),
// which decides what WatchJob sends and what `cohortctl watch` prints.

#include "gtest/gtest.h"
#include "proto/job_state.h"

namespace cohort {
namespace {

v1::JobStatus Running() {
  v1::JobStatus status;
  status.set_state(v1::JOB_RUNNING);
  status.set_step(10);
  status.set_steps_per_second(3.5);
  return status;
}

TEST(JobStatusChangedTest, StepsPerSecondAloneIsNotNews) {
  v1::JobStatus now = Running();
  now.set_steps_per_second(4.0);
  EXPECT_FALSE(JobStatusChanged(Running(), now));
  now.set_step(11);
  EXPECT_TRUE(JobStatusChanged(Running(), now));
}

TEST(JobStatusChangedTest, WhatAWaitingAttemptWaitsForIsNews) {
  v1::JobStatus now = Running();
  now.set_waiting_for("worker:1 (DEAD: no heartbeat for 10s)");
  EXPECT_TRUE(JobStatusChanged(Running(), now));
  v1::JobStatus replicas = Running();
  replicas.set_num_replicas(4);
  EXPECT_TRUE(JobStatusChanged(Running(), replicas));
}

TEST(JobStatusChangedTest, ANewEventIsNewsEvenWhenTheCapKeepsTheCount) {
  v1::JobStatus before = Running();
  before.add_events()->set_text("ps:0 restarted");
  v1::JobStatus now = before;
  EXPECT_FALSE(JobStatusChanged(before, now));
  // The oldest event dropped, a newer one added: the same count.
  now.mutable_events()->DeleteSubrange(0, 1);
  v1::JobEvent* newer = now.add_events();
  newer->set_time_unix_ms(5);
  newer->set_text("ps:1 restarted");
  EXPECT_TRUE(JobStatusChanged(before, now));
}

}  // namespace
}  // namespace cohort
