// ClusterCoordinator end to end: a client program schedules calls onto a
// ParameterServer job of a real cluster (a chief and a worker agent, two ps
// tasks), reads their results and the variables, and finishes the job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "cohort/cluster_coordinator.h"
#include "common/file_util.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"
#include "tests/testing/wait.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

class PsScheduleE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(
        *dir_, /*workers=*/1, /*ps=*/2,
        {"--cpu_devices=2",
         absl::StrCat("--state_dir=", dir_->path(), "/state")});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    coordinator_ = cluster->coordinator.release();
    client_ = Client::Connect(coordinator_->address())->release();
    data_ = dir_->path() + "/spirals";
    const absl::Status spirals = WriteSpirals(data_);
    ASSERT_TRUE(spirals.ok()) << spirals;
  }
  static void TearDownTestSuite() {
    delete client_;
    delete coordinator_;
    delete dir_;
  }

  // The MLP with no steps of its own, its variables split over both ps.
  static JobSpec ScheduledMlp() {
    JobSpec spec =
        MlpJob(data_, StrategyKind::kParameterServer, /*steps=*/0, "file");
    spec.name = "mlp-scheduled";
    spec.step_fn.clear();
    spec.ps.schedule_from_client = true;
    spec.ps.partitioner = ParameterServerOptions::Partitioner::kFixedShards;
    spec.ps.num_shards = 2;
    return spec;
  }

  static std::string Submit(const JobSpec& spec) {
    absl::StatusOr<std::string> id = client_->SubmitJob(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  // Finishes the job and waits for its end; SUCCEEDED expected.
  static void FinishAndExpectSuccess(ClusterCoordinator& coordinator) {
    ASSERT_TRUE(coordinator.Finish().ok());
    const v1::JobStatus status =
        WaitForJobEnd(*client_, coordinator.job_id(), absl::Seconds(60));
    EXPECT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  }

  static ScratchDir* dir_;
  static CoordinatorProcess* coordinator_;
  static Client* client_;
  static std::string data_;
};

ScratchDir* PsScheduleE2eTest::dir_ = nullptr;
CoordinatorProcess* PsScheduleE2eTest::coordinator_ = nullptr;
Client* PsScheduleE2eTest::client_ = nullptr;
std::string PsScheduleE2eTest::data_;

TEST_F(PsScheduleE2eTest, CallsReturnResultsAndTheVariablesReadAsTheyStay) {
  ClusterCoordinator coordinator(client_, Submit(ScheduledMlp()));
  std::vector<RemoteValue> evals;
  for (int step = 1; step <= 200; ++step) {
    ASSERT_TRUE(
        coordinator.Schedule("mlp_step", {}, {.takes_batch = true}).ok());
    if (step % 100 == 0) {
      absl::StatusOr<RemoteValue> eval =
          coordinator.Schedule("mlp_held_out", {static_cast<double>(step)});
      ASSERT_TRUE(eval.ok()) << eval.status();
      evals.push_back(*eval);
    }
  }
  absl::Status joined = coordinator.Join(absl::Seconds(120));
  ASSERT_TRUE(joined.ok()) << joined;
  EXPECT_TRUE(*coordinator.Done());

  // Each evaluation saw the training before it; the later one learned more.
  std::vector<double> accuracy;
  for (size_t i = 0; i < evals.size(); ++i) {
    absl::StatusOr<std::map<std::string, double>> metrics =
        evals[i].Fetch(absl::Seconds(5));
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_EQ(metrics->at("after_step"), 100.0 * (i + 1));
    accuracy.push_back(metrics->at("accuracy"));
  }
  EXPECT_GT(accuracy.back(), 0.85);

  // Split variables come back whole, and nothing moves them once joined.
  absl::StatusOr<std::map<std::string, HostTensor>> during =
      coordinator.FetchVariables();
  ASSERT_TRUE(during.ok()) << during.status();
  ASSERT_EQ(during->size(), 6u);
  EXPECT_THAT(during->at("dense1/kernel").shape,
              ::testing::ElementsAre(32, 32));
  EXPECT_EQ(during->at("dense1/kernel").bytes.size(), 32u * 32 * 4);
  FinishAndExpectSuccess(coordinator);
  absl::StatusOr<std::map<std::string, HostTensor>> after =
      client_->FetchVariables(coordinator.job_id(), {"dense1/kernel"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->at("dense1/kernel").bytes,
            during->at("dense1/kernel").bytes);
  const v1::JobStatus status = *client_->GetJob(coordinator.job_id());
  EXPECT_EQ(status.step(), 202);
  EXPECT_EQ(status.calls_scheduled(), 202);
}

TEST_F(PsScheduleE2eTest, AFailedCallIsItsOwnErrorAndTheJobGoesOn) {
  ClusterCoordinator coordinator(client_, Submit(ScheduledMlp()));
  absl::StatusOr<RemoteValue> missing = coordinator.Schedule("no_such_fn");
  ASSERT_TRUE(missing.ok()) << missing.status();
  absl::StatusOr<std::map<std::string, double>> result =
      missing->Fetch(absl::Seconds(60));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(result.status().message(), HasSubstr("\"no_such_fn\""));
  EXPECT_THAT(result.status().message(), HasSubstr("mlp_step"));
  absl::Status joined = coordinator.Join(absl::Seconds(60));
  EXPECT_THAT(joined.message(), HasSubstr("call 0 failed"));

  absl::StatusOr<RemoteValue> good =
      coordinator.Schedule("mlp_step", {}, {.takes_batch = true});
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<std::map<std::string, double>> loss =
      good->Fetch(absl::Seconds(60));
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_GT(loss->at("loss"), 0);
  // Raised once, as TF's join clears what it raised: the next Join names
  // only a newer failure.
  joined = coordinator.Join(absl::Seconds(60));
  EXPECT_TRUE(joined.ok()) << joined;
  absl::StatusOr<RemoteValue> again = coordinator.Schedule("no_such_fn");
  ASSERT_TRUE(again.ok()) << again.status();
  joined = coordinator.Join(absl::Seconds(60));
  EXPECT_THAT(joined.message(),
              HasSubstr(absl::StrCat("call ", again->id(), " failed")));
  EXPECT_THAT(joined.message(), HasSubstr("1 more failed since the last Join"));
  FinishAndExpectSuccess(coordinator);
  // A finished job takes no more calls, and says why.
  absl::StatusOr<RemoteValue> late = coordinator.Schedule("mlp_step");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

// worker:0's executor parks in its first call, so that the kill certainly
// takes calls with it; they must run again, and the job's record must say
// how many.
TEST_F(PsScheduleE2eTest, TheCallsAKilledWorkerHeldRunAgain) {
  const std::string parked = dir_->path() + "/parked";
  ASSERT_TRUE(std::filesystem::create_directories(parked));
  JobSpec spec{
      .name = "parking",
      .strategy = StrategyKind::kParameterServer,
      .library_path = TestStepsLibrary(),
      .steps = 0,
      .global_batch_size = 4,
      .config_json = absl::StrCat(R"({"park_dir": ")", parked, R"("})")};
  spec.ps.schedule_from_client = true;
  ClusterCoordinator coordinator(client_, Submit(spec));
  // Calls until worker:0's executor has taken one and parked in it: the
  // chief's executor returns at once from those it takes, and may take
  // many first.
  std::vector<int64_t> ids;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (std::filesystem::is_empty(parked) && ids.size() < 5000 &&
         absl::Now() < deadline) {
    absl::StatusOr<RemoteValue> call =
        coordinator.Schedule("park_on_worker_step");
    ASSERT_TRUE(call.ok()) << call.status();
    ids.push_back(call->id());
    if (ids.size() % 10 == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_FALSE(std::filesystem::is_empty(parked))
      << "worker:0 took none of " << ids.size() << " calls";
  absl::StatusOr<v1::ClusterState> state = coordinator_->State();
  ASSERT_TRUE(state.ok()) << state.status();
  const v1::TaskStatus* worker = FindTask(*state, "worker", 0);
  ASSERT_NE(worker, nullptr);
  ASSERT_GT(worker->pid(), 0);
  ASSERT_EQ(kill(static_cast<pid_t>(worker->pid()), SIGKILL), 0);

  absl::Status joined = coordinator.Join(absl::Seconds(120));
  ASSERT_TRUE(joined.ok()) << joined;
  absl::StatusOr<v1::GetCallsResponse> calls =
      client_->GetCalls(coordinator.job_id(), ids);
  ASSERT_TRUE(calls.ok()) << calls.status();
  for (const v1::CallStatus& call : calls->calls()) {
    EXPECT_EQ(call.state(), v1::CallStatus::DONE) << "call " << call.id();
  }
  // The loss and what it re-queued: at least the parked call, and as many
  // as were run again.
  const std::regex lost(
      R"(worker:0 lost \(.*\); ([0-9]+) in-flight closure\(s\) re-queued)");
  int requeued = -1;
  const v1::JobStatus status = WaitForJob(
      *client_, coordinator.job_id(),
      [&](const v1::JobStatus& s) {
        for (const v1::JobEvent& event : s.events()) {
          std::smatch match;
          if (std::regex_search(event.text(), match, lost)) {
            requeued = std::stoi(match[1]);
            return true;
          }
        }
        return false;
      },
      absl::Seconds(60));
  std::cout << "worker:0 lost with " << requeued << " call(s) in flight\n";
  EXPECT_GE(requeued, 1);
  EXPECT_EQ(status.closures_rerun(), requeued);
  FinishAndExpectSuccess(coordinator);
}

TEST_F(PsScheduleE2eTest, AJobWhoseClientWentAwayFailsSayingSo) {
  JobSpec spec = ScheduledMlp();
  spec.ps.client_timeout = absl::Seconds(1);
  const std::string id = Submit(spec);
  const v1::JobStatus status = WaitForJobEnd(*client_, id, absl::Seconds(60));
  EXPECT_EQ(status.state(), v1::JOB_FAILED);
  EXPECT_THAT(status.error(), HasSubstr("went away"));
}

TEST_F(PsScheduleE2eTest, TheExampleProgramTrainsWithAnEvaluationEveryNSteps) {
  const CommandResult run = RunCommand(
      {Binary("cohort-example-ps-schedule"),
       "--coordinator=" + coordinator_->address(), "--data_dir=" + data_,
       "--steps=300", "--eval_every=100", "--min_accuracy=0.85"},
      absl::Seconds(180));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("step   100: held-out accuracy"));
  EXPECT_THAT(run.output, HasSubstr("step   300: held-out accuracy"));
  EXPECT_THAT(run.output,
              HasSubstr("variable dense1/kernel    float32 [32,32]"));
  EXPECT_THAT(run.output, HasSubstr("JOB_SUCCEEDED after 303 calls"));

  // cohortctl reads the variables of the ended job, named in "job N:".
  const size_t at = run.output.find("job ");
  ASSERT_NE(at, std::string::npos);
  const std::string id =
      run.output.substr(at + 4, run.output.find(':', at) - at - 4);
  const CommandResult variables = RunCommand(
      {Binary("cohortctl"), "--coordinator=" + coordinator_->address(),
       "variables", id, "--names=dense2/bias"});
  EXPECT_EQ(variables.exit_code, 0) << variables.output;
  EXPECT_THAT(variables.output, HasSubstr("dense2/bias  float32  [2]"));
}

TEST_F(PsScheduleE2eTest, TheExampleProgramStoppedMidwayCancelsItsJob) {
  // Left running, the job would hold the cluster until its client timeout.
  const std::string out = dir_->path() + "/stopped.log";
  absl::StatusOr<Subprocess> run = Subprocess::Spawn(
      {.argv = {Binary("cohort-example-ps-schedule"),
                "--coordinator=" + coordinator_->address(),
                "--data_dir=" + data_, "--steps=4000", "--eval_every=1000"},
       .output_file = out});
  ASSERT_TRUE(run.ok()) << run.status();
  std::string id;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string text = ReadFile(out).value_or("");
        const size_t at = text.find("job ");
        const size_t colon = text.find(':', at);
        if (at == std::string::npos || colon == std::string::npos) {
          return false;
        }
        id = text.substr(at + 4, colon - at - 4);
        return true;
      },
      absl::Seconds(60)))
      << ReadFile(out).value_or("");
  run->Signal(SIGTERM);
  const std::optional<ExitStatus> exit = run->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit.has_value()) << ReadFile(out).value_or("");
  EXPECT_EQ(exit->exit_code(), 1) << ReadFile(out).value_or("");
  EXPECT_THAT(ReadFile(out).value_or(""),
              HasSubstr("interrupted; cancelling job " + id));
  const v1::JobStatus status = WaitForJobEnd(*client_, id, absl::Seconds(30));
  EXPECT_EQ(status.state(), v1::JOB_CANCELLED) << status.DebugString();
}

}  // namespace
}  // namespace cohort::testing
