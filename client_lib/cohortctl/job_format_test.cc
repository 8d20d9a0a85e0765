#include "client_lib/cohortctl/job_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "client_lib/cohortctl/progress.h"

namespace cohort::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const absl::Time kSubmit = absl::FromUnixSeconds(1'700'000'000);

v1::JobStatus Job(v1::JobState state, int64_t step,
                  std::map<std::string, double> metrics = {}) {
  v1::JobStatus job;
  job.set_job_id("3");
  job.mutable_spec()->set_name("mnist");
  job.mutable_spec()->set_steps(1000);
  job.mutable_spec()->set_global_batch_size(64);
  job.mutable_spec()->set_step_fn("train_step");
  job.mutable_spec()->set_max_restarts(3);
  job.set_state(state);
  job.set_step(step);
  job.set_attempt(1);
  job.set_submit_time_unix_ms(absl::ToUnixMillis(kSubmit));
  for (const auto& [name, value] : metrics)
    (*job.mutable_metrics())[name] = value;
  return job;
}

v1::RestartRecord* AddRestart(v1::JobStatus& job, int attempt,
                              const std::string& cause, int64_t from) {
  v1::RestartRecord* restart = job.add_restarts();
  restart->set_attempt(attempt);
  restart->set_cause(cause);
  restart->set_resumed_from_step(from);
  restart->set_spent(true);
  restart->set_time_unix_ms(absl::ToUnixMillis(kSubmit + absl::Seconds(5)));
  return restart;
}

TEST(ParseTest, StrategiesAndCommunications) {
  EXPECT_EQ(*ParseStrategy("multi_worker_mirrored"),
            StrategyKind::kMultiWorkerMirrored);
  EXPECT_EQ(*ParseStrategy("mirrored"), StrategyKind::kMirrored);
  EXPECT_EQ(*ParseStrategy("one_device"), StrategyKind::kOneDevice);
  EXPECT_EQ(*ParseStrategy("central_storage"), StrategyKind::kCentralStorage);
  EXPECT_EQ(*ParseCommunication("auto"), Communication::kAuto);
  EXPECT_EQ(*ParseCommunication("ring"), Communication::kRing);
  EXPECT_EQ(*ParseCommunication("nccl"), Communication::kNccl);
  EXPECT_EQ(*ParseCommunication("hierarchical"), Communication::kHierarchical);
}

TEST(ParseTest, UnknownNamesListTheValidOnes) {
  const absl::Status strategy = ParseStrategy("Mirrored").status();
  EXPECT_EQ(strategy.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(strategy.message()),
              HasSubstr("\"Mirrored\"; valid: multi_worker_mirrored, "
                        "mirrored, one_device"));
  const absl::Status communication = ParseCommunication("mpi").status();
  EXPECT_EQ(communication.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(communication.message()),
              HasSubstr("\"mpi\"; valid: auto, ring, nccl, hierarchical"));
}

TEST(FormatTest, ShortDuration) {
  EXPECT_EQ(ShortDuration(absl::Milliseconds(950)), "950ms");
  EXPECT_EQ(ShortDuration(absl::Milliseconds(11'500)), "11.5s");
  EXPECT_EQ(ShortDuration(absl::Seconds(185)), "3m05s");
  EXPECT_EQ(ShortDuration(absl::Minutes(124)), "2h04m");
  EXPECT_EQ(ShortDuration(absl::Hours(74)), "3d02h");
  EXPECT_EQ(ShortDuration(-absl::Seconds(3)), "0ms");
}

TEST(FormatTest, MetricsSortedByName) {
  const v1::JobStatus job =
      Job(v1::JOB_RUNNING, 1, {{"loss", 0.0213}, {"accuracy", 0.98123456}});
  EXPECT_EQ(FormatMetrics(job), "accuracy=0.9812 loss=0.0213");
  EXPECT_EQ(FormatMetrics(job, 6), "accuracy=0.981235 loss=0.0213");
  EXPECT_EQ(FormatMetrics(Job(v1::JOB_RUNNING, 1)), "");
}

TEST(FormatTest, StateNames) {
  EXPECT_EQ(JobStateName(v1::JOB_RUNNING), "RUNNING");
  EXPECT_EQ(JobStateName(v1::JOB_CANCELLED), "CANCELLED");
  EXPECT_TRUE(IsTerminal(v1::JOB_FAILED));
  EXPECT_FALSE(IsTerminal(v1::JOB_RESTARTING));
}

TEST(ProgressTest, Bar) {
  v1::JobStatus job = Job(v1::JOB_RUNNING, 512, {{"loss", 0.0213}});
  job.set_steps_per_second(87.3);
  EXPECT_EQ(ProgressBar(job, 120),
            "[##########..........] 512/1000  51%  87.3 steps/s  loss 0.0213  "
            "ETA 6s");
}

TEST(ProgressTest, BarWithoutRateOrLossShowsFirstMetric) {
  const v1::JobStatus job =
      Job(v1::JOB_RUNNING, 0, {{"top5", 0.5}, {"accuracy", 0.25}});
  EXPECT_EQ(ProgressBar(job, 120),
            "[....................] 0/1000  0%  accuracy 0.25");
}

TEST(ProgressTest, BarLongEtaAndFullBar) {
  v1::JobStatus job = Job(v1::JOB_RUNNING, 100);
  job.set_steps_per_second(2);
  EXPECT_THAT(ProgressBar(job, 120), HasSubstr("ETA 7m30s"));
  job.set_step(1000);
  EXPECT_EQ(ProgressBar(job, 120),
            "[####################] 1000/1000  100%  2.0 steps/s");
}

TEST(ProgressTest, BarFitsTheTerminal) {
  v1::JobStatus job = Job(v1::JOB_RUNNING, 512, {{"loss", 0.0213}});
  job.set_steps_per_second(87.3);
  EXPECT_EQ(ProgressBar(job, 71),
            "[##########..........] 512/1000  51%  loss 0.0213  ETA 6s");
  EXPECT_EQ(ProgressBar(job, 50),
            "[##########..........] 512/1000  51%  ETA 6s");
  EXPECT_EQ(ProgressBar(job, 40), "[##########..........] 512/1000  51%");
  EXPECT_EQ(ProgressBar(job, 30), "512/1000  51%");
  EXPECT_EQ(ProgressBar(job, 5), "512/");
}

TEST(ProgressTest, Line) {
  v1::JobStatus job = Job(v1::JOB_RUNNING, 512, {{"loss", 0.0213}});
  job.set_steps_per_second(87.3);
  EXPECT_EQ(ProgressLine(job), "step 512/1000 (51%) 87.3 steps/s loss=0.0213");
  EXPECT_EQ(ProgressLine(Job(v1::JOB_RUNNING, 0)), "step 0/1000 (0%)");
}

TEST(ProgressTest, Summary) {
  v1::JobStatus job =
      Job(v1::JOB_SUCCEEDED, 1000, {{"loss", 0.0012}, {"accuracy", 0.981}});
  job.set_end_time_unix_ms(absl::ToUnixMillis(kSubmit + absl::Seconds(11.5)));
  EXPECT_EQ(SummaryLine(job, kSubmit + absl::Hours(1)),
            "job 3 SUCCEEDED: 1000 steps in 11.5s; accuracy=0.981 loss=0.0012");

  v1::JobStatus failed = Job(v1::JOB_FAILED, 512);
  AddRestart(failed, 2, "worker:0 lost", 500);
  EXPECT_EQ(SummaryLine(failed, kSubmit + absl::Seconds(3)),
            "job 3 FAILED: 512/1000 steps in 3.0s with 1 restart");
}

TEST(WatchViewTest, TerminalRedrawsOneLineAndPrintsStateChanges) {
  WatchView view(/*terminal=*/true, 100);
  absl::Time now = kSubmit;
  EXPECT_EQ(view.Update(Job(v1::JOB_PLACING, 0), now), "job 3 PLACING\n");

  v1::JobStatus running = Job(v1::JOB_RUNNING, 10, {{"loss", 1.5}});
  running.set_num_replicas(4);
  running.set_communication_note("hierarchical: CPU replicas");
  EXPECT_EQ(view.Update(running, now),
            "job 3 RUNNING (attempt 1, 4 replicas); hierarchical: CPU "
            "replicas\n\r\x1b[K[....................] 10/1000  1%  loss 1.5");

  running.set_step(20);
  EXPECT_EQ(view.Update(running, now),
            "\r\x1b[K[....................] 20/1000  2%  loss 1.5");

  v1::JobStatus restarting = running;
  restarting.set_state(v1::JOB_RESTARTING);
  AddRestart(restarting, 2, "worker:1 lost: UNAVAILABLE", 0);
  EXPECT_EQ(view.Update(restarting, now),
            "\r\x1b[Kjob 3 RESTARTING (attempt 2): worker:1 lost: "
            "UNAVAILABLE; starting over\n");

  v1::JobStatus done = restarting;
  done.set_state(v1::JOB_SUCCEEDED);
  done.set_step(1000);
  done.set_end_time_unix_ms(absl::ToUnixMillis(kSubmit + absl::Seconds(2)));
  EXPECT_EQ(view.Update(done, now), "");
  EXPECT_EQ(view.Finish(done, now),
            "job 3 SUCCEEDED: 1000 steps in 2.0s with 1 restart; loss=1.5\n");
}

TEST(WatchViewTest, APlacingJobSaysWhatItWaitsForEachTimeThatChanges) {
  WatchView view(/*terminal=*/false, 80);
  v1::JobStatus placing = Job(v1::JOB_PLACING, 0);
  placing.set_waiting_for("chief:0 (unknown), worker:0 (DEAD: exited)");
  EXPECT_EQ(view.Update(placing, kSubmit),
            "job 3 PLACING; waiting for chief:0 (unknown), worker:0 (DEAD: "
            "exited)\n");
  EXPECT_EQ(view.Update(placing, kSubmit), "");
  placing.set_waiting_for("worker:0 (DEAD: exited)");
  EXPECT_EQ(view.Update(placing, kSubmit),
            "job 3 PLACING; waiting for worker:0 (DEAD: exited)\n");
  // Placed: nothing to wait for, and nothing new to say until it runs.
  placing.clear_waiting_for();
  EXPECT_EQ(view.Update(placing, kSubmit), "");
  EXPECT_THAT(JobDetails(placing, kSubmit, absl::UTCTimeZone()),
              Not(HasSubstr("waiting for")));
  placing.set_waiting_for("worker:0 (DEAD: exited)");
  EXPECT_THAT(JobDetails(placing, kSubmit, absl::UTCTimeZone()),
              HasSubstr("  waiting for worker:0 (DEAD: exited)\n"));
}

TEST(WatchViewTest, EventsAfterTheWatchBeganArePrintedOnce) {
  WatchView view(/*terminal=*/false, 80);
  v1::JobStatus job = Job(v1::JOB_PLACING, 0);
  auto add_event = [&job](int64_t ms, const std::string& text) {
    v1::JobEvent* event = job.add_events();
    event->set_time_unix_ms(ms);
    event->set_text(text);
  };
  add_event(1, "before the watch");
  EXPECT_EQ(view.Update(job, kSubmit), "job 3 PLACING\n");
  add_event(2, "chief:0: early_stopping watches \"losss\"");
  EXPECT_EQ(view.Update(job, kSubmit),
            "chief:0: early_stopping watches \"losss\"\n");
  EXPECT_EQ(view.Update(job, kSubmit), "");
  // An event's text rewritten in place (a ps recovery's counts) is not new,
  // and does not bring back the ones before it.
  job.mutable_events(1)->set_text("chief:0: rewritten");
  EXPECT_EQ(view.Update(job, kSubmit), "");
  // The job keeps its newest events: the oldest go as new ones come.
  job.mutable_events()->DeleteSubrange(0, 2);
  add_event(3, "ps:0 recovered");
  add_event(4, "worker:1 lost");
  EXPECT_EQ(view.Update(job, kSubmit), "ps:0 recovered\nworker:1 lost\n");
  job.mutable_events()->DeleteSubrange(0, 1);
  add_event(5, "worker:1 back");
  EXPECT_EQ(view.Update(job, kSubmit), "worker:1 back\n");
}

TEST(WatchViewTest, FinishAndInterruptEndALiveBar) {
  WatchView view(/*terminal=*/true, 100);
  view.Update(Job(v1::JOB_RUNNING, 10), kSubmit);
  EXPECT_EQ(view.Interrupt(), "\n");
  EXPECT_EQ(view.Interrupt(), "");
  view.Update(Job(v1::JOB_RUNNING, 11), kSubmit);
  EXPECT_THAT(view.Finish(Job(v1::JOB_CANCELLED, 11), kSubmit),
              StartsWith("\r\x1b[Kjob 3 CANCELLED: 11/1000 steps"));
}

TEST(WatchViewTest, PlainPrintsProgressAtMostOncePerSecond) {
  WatchView view(/*terminal=*/false, 80);
  absl::Time now = kSubmit;
  EXPECT_EQ(view.Update(Job(v1::JOB_RUNNING, 1), now),
            "job 3 RUNNING (attempt 1)\nstep 1/1000 (0%)\n");
  now += absl::Milliseconds(400);
  EXPECT_EQ(view.Update(Job(v1::JOB_RUNNING, 2), now), "");
  now += absl::Milliseconds(700);
  EXPECT_EQ(view.Update(Job(v1::JOB_RUNNING, 3), now), "step 3/1000 (0%)\n");
  now += absl::Seconds(5);
  // Nothing new to say about the same step.
  EXPECT_EQ(view.Update(Job(v1::JOB_RUNNING, 3), now), "");

  v1::JobStatus restarted = Job(v1::JOB_RUNNING, 3);
  restarted.set_attempt(2);
  AddRestart(restarted, 2, "chief:0 exited", 2);
  EXPECT_EQ(view.Update(restarted, now),
            "job 3 RESTARTING (attempt 2): chief:0 exited; resuming from step "
            "2\n");
  EXPECT_THAT(view.Update(restarted, now), Not(HasSubstr("\r")));
}

TEST(WatchViewTest, FirstUpdateShowsOnlyTheRestartInProgress) {
  v1::JobStatus job = Job(v1::JOB_RESTARTING, 40);
  AddRestart(job, 2, "old cause", 0);
  AddRestart(job, 3, "new cause", 30);
  WatchView view(/*terminal=*/false, 80);
  EXPECT_EQ(view.Update(job, kSubmit),
            "job 3 RESTARTING (attempt 3): new cause; resuming from step 30\n");

  v1::JobStatus running = Job(v1::JOB_RUNNING, 40);
  *running.mutable_restarts() = job.restarts();
  WatchView later(/*terminal=*/false, 80);
  EXPECT_THAT(later.Update(running, kSubmit), Not(HasSubstr("cause")));
}

TEST(JobsTableTest, RowsAligned) {
  v1::JobStatus running = Job(v1::JOB_RUNNING, 512);
  running.set_steps_per_second(87.25);
  v1::JobStatus failed = Job(v1::JOB_FAILED, 7);
  failed.set_job_id("12");
  failed.mutable_spec()->clear_name();
  failed.set_attempt(2);
  failed.set_end_time_unix_ms(absl::ToUnixMillis(kSubmit + absl::Seconds(9)));
  failed.set_error(
      "step function returned INTERNAL: a very long explanation that goes "
      "on\nand a second line");
  const std::string table =
      JobsTable({running, failed}, kSubmit + absl::Seconds(65));
  EXPECT_EQ(table,
            "ID  NAME   STATE    STEP      STEPS/S  ATTEMPT  AGE    DURATION  "
            "ERROR\n"
            "3   mnist  RUNNING  512/1000  87.2     1        1m05s  1m05s     "
            "\n"
            "12  -      FAILED   7/1000    -        2        1m05s  9.0s      "
            "step function returned INTERNAL: a very long ...\n");
  EXPECT_EQ(JobsTable({}, kSubmit), "no jobs\n");
}

TEST(JobDetailsTest, ShowsHistoryPlacementAndError) {
  v1::JobStatus job = Job(v1::JOB_RUNNING, 600, {{"loss", 0.5}});
  job.set_attempt(2);
  job.set_steps_per_second(10);
  job.mutable_spec()->set_library_name("libmnist_steps.so");
  job.mutable_spec()->set_library_digest(std::string(64, 'a'));
  job.mutable_spec()->set_init_fn("init");
  job.mutable_spec()->set_checkpoint_every(100);
  job.mutable_spec()->set_checkpoint_interval_ms(600000);
  job.set_num_replicas(4);
  job.add_placement("chief:0 (2 replicas)");
  job.add_placement("worker:0 (2 replicas)");
  v1::RingLink* link = job.add_links();
  link->set_ring("agents");
  link->set_from_rank(0);
  link->set_to_rank(1);
  link->set_from_task("chief:0");
  link->set_to_task("worker:0");
  link->set_transport("grpc");
  link->set_to_address("10.1.0.3:20004");
  job.set_checkpoint_dir("/ckpt/3");
  job.set_checkpoint_step(600);
  AddRestart(job, 2, "worker:0 lost", 500);
  AddRestart(job, 3, "coordinator restarted", 600)->set_spent(false);
  job.set_error("");
  const std::string details =
      JobDetails(job, kSubmit + absl::Seconds(90), absl::UTCTimeZone());
  EXPECT_THAT(details, StartsWith("job 3 \"mnist\"  RUNNING  attempt 2\n"));
  EXPECT_THAT(details,
              HasSubstr("  step        600/1000 (60%), 10.0 steps/s\n"));
  EXPECT_THAT(details, HasSubstr("  metrics     loss=0.5\n"));
  EXPECT_THAT(details, HasSubstr("libmnist_steps.so  sha256 aaaaaaaaaaaa\n"));
  EXPECT_THAT(details, HasSubstr("step=train_step init=init\n"));
  EXPECT_THAT(details,
              HasSubstr("chief:0 (2 replicas), worker:0 (2 replicas)\n"));
  EXPECT_THAT(details,
              HasSubstr("  link        agents 0->1 chief:0 -> worker:0 grpc to "
                        "10.1.0.3:20004\n"));
  EXPECT_THAT(details,
              HasSubstr("/ckpt/3, last at step 600, every 100 steps or 10m\n"));
  EXPECT_THAT(details, HasSubstr("2023-11-14 22:13:20 (1m30s ago)"));
  EXPECT_THAT(details, HasSubstr("1 of at most 3 (+1 not counted)\n"));
  EXPECT_THAT(details,
              HasSubstr("    2        2023-11-14 22:13:25  step 500      "
                        "worker:0 lost\n"));
  EXPECT_THAT(details, HasSubstr("    3*"));
  EXPECT_THAT(details, Not(HasSubstr("error")));

  job.set_state(v1::JOB_FAILED);
  job.set_error("step function returned INTERNAL: nan loss");
  EXPECT_THAT(
      JobDetails(job, kSubmit, absl::UTCTimeZone()),
      HasSubstr("  error       step function returned INTERNAL: nan loss\n"));
}

TEST(JsonTest, EveryFieldWithProtoNames) {
  absl::StatusOr<std::string> json = ProtoToJson(Job(v1::JOB_SUBMITTED, 0));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"job_id\": \"3\""));
  EXPECT_THAT(*json, HasSubstr("\"state\": \"JOB_SUBMITTED\""));
  EXPECT_THAT(*json, HasSubstr("\"step\": \"0\""));
  EXPECT_THAT(*json, HasSubstr("\"checkpoint_dir\": \"\""));
}

TEST(JobFormatTest, VariablesTableShowsShapeNormAndTheFirstValues) {
  HostTensor w{.dtype = "float32", .shape = {2, 2}};
  const float values[] = {3, 4, 0, 0};
  w.bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  HostTensor step{.dtype = "int64", .shape = {}};
  const int64_t seven = 7;
  step.bytes.assign(reinterpret_cast<const char*>(&seven), sizeof(seven));
  const std::string table = VariablesTable({{"w", w}, {"step", step}}, 3);
  EXPECT_THAT(table, HasSubstr("w     float32  [2,2]  5     3 4 0 ..."));
  EXPECT_THAT(table, HasSubstr("step  int64    []     7     7"));
  EXPECT_TRUE(ValuesAsDoubles({.dtype = "bfloat16", .bytes = "ab"}).empty());
}

}  // namespace
}  // namespace cohort::ctl
