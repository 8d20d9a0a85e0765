// Jobs end to end: the real coordinator launches two agents of four CPU
// devices each; step libraries are submitted through the client library and
// train, fail, crash and restart for real.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cohort/client.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

std::string Library(const std::string& name) { return ExampleLibrary(name); }
std::string TestLibrary(const std::string& name) {
  return absl::StrCat(BinDir(), "/../tests/lib", name, ".so");
}

constexpr char kLinearConfig[] =
    R"({"dim": 4, "num_examples": 1024, "true_w": [0.5, -1.25, 2.0, 0.75],
        "true_b": 0.3, "learning_rate": 0.2, "shard_policy": "data"})";
const double kTrueW[] = {0.5, -1.25, 2.0, 0.75};
constexpr double kTrueB = 0.3;

JobSpec LinearJob(StrategyKind strategy, int devices_per_agent, int64_t steps) {
  return JobSpec{.name = "linear",
                 .strategy = strategy,
                 .library_path = Library("cohort_example_linear"),
                 .init_fn = "linear_init",
                 .step_fn = "linear_step",
                 .dataset_fn = "linear_data",
                 .steps = steps,
                 .global_batch_size = 64,
                 .seed = 7,
                 .config_json = kLinearConfig,
                 .devices_per_agent = devices_per_agent};
}

class JobsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    absl::StatusOr<ReadyCluster> cluster = StartReadyCluster(
        *dir_, /*workers=*/1, /*ps=*/1,
        {"--cpu_devices=4",
         absl::StrCat("--state_dir=", dir_->path(), "/state")});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    coordinator_ = cluster->coordinator.release();
    client_ = Client::Connect(coordinator_->address())->release();
    const absl::Status spirals = WriteSpirals(SpiralsDir());
    ASSERT_TRUE(spirals.ok()) << spirals;
  }
  static std::string SpiralsDir() { return dir_->path() + "/spirals"; }
  // The MLP example on the spirals' 4 record files, 2 devices per agent.
  static JobSpec MlpJob(StrategyKind strategy, int64_t steps,
                        const std::string& shard_policy) {
    return testing::MlpJob(SpiralsDir(), strategy, steps, shard_policy);
  }
  static void TearDownTestSuite() {
    delete client_;
    delete coordinator_;
    delete dir_;
  }

  // Submits and waits for the end; the final status. `client`: of the
  // shared cluster unless a test brings its own.
  static v1::JobStatus Run(const JobSpec& spec,
                           absl::Duration timeout = absl::Seconds(60),
                           Client* client = client_) {
    absl::StatusOr<std::string> id = client->SubmitJob(spec);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return {};
    return WaitForEnd(*id, timeout, client);
  }
  static v1::JobStatus WaitForEnd(const std::string& id, absl::Duration timeout,
                                  Client* client = client_) {
    return WaitForJobEnd(*client, id, timeout);
  }
  static Checkpoint Final(const v1::JobStatus& status) {
    absl::StatusOr<Checkpoint> checkpoint =
        LoadLatestCheckpoint(status.checkpoint_dir());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    return checkpoint.ok() ? *checkpoint : Checkpoint{};
  }
  static ScratchDir* dir_;
  static CoordinatorProcess* coordinator_;
  static Client* client_;
};

ScratchDir* JobsE2eTest::dir_ = nullptr;
CoordinatorProcess* JobsE2eTest::coordinator_ = nullptr;
Client* JobsE2eTest::client_ = nullptr;

TEST_F(JobsE2eTest, LinearRegressionLearnsTheTrueWeights) {
  const v1::JobStatus status =
      Run(LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 300));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_EQ(status.num_replicas(), 4);
  EXPECT_EQ(status.step(), 300);
  const std::vector<double> params = LinearParameters(status);
  ASSERT_EQ(params.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(params[i], kTrueW[i], 1e-3) << i;
  EXPECT_NEAR(params[4], kTrueB, 1e-3);
  EXPECT_LT(status.metrics().at("max_weight_error"), 1e-3);
}

TEST_F(JobsE2eTest, MlpReachesNinetyFivePercentWithFileSharding) {
  const v1::JobStatus status =
      Run(MlpJob(StrategyKind::kMultiWorkerMirrored, 600, "file"),
          absl::Seconds(90));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  EXPECT_GE(status.metrics().at("accuracy"), kMlpAccuracyBar);
}

TEST_F(JobsE2eTest, OneDeviceMirroredAndMultiWorkerAgreeAndRepeatBitwise) {
  const v1::JobStatus one = Run(LinearJob(StrategyKind::kOneDevice, 0, 40));
  const v1::JobStatus mirrored = Run(LinearJob(StrategyKind::kMirrored, 4, 40));
  const v1::JobStatus multi =
      Run(LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 40));
  const v1::JobStatus again =
      Run(LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 40));
  for (const v1::JobStatus* s : {&one, &mirrored, &multi, &again}) {
    ASSERT_EQ(s->state(), v1::JOB_SUCCEEDED) << s->error();
  }
  EXPECT_EQ(one.num_replicas(), 1);
  EXPECT_EQ(mirrored.num_replicas(), 4);
  EXPECT_EQ(multi.num_replicas(), 4);
  const std::vector<double> a = LinearParameters(one);
  const std::vector<double> b = LinearParameters(mirrored);
  const std::vector<double> c = LinearParameters(multi);
  const std::vector<double> d = LinearParameters(again);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  ASSERT_EQ(c.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(std::abs(a[i]), 1e-12);
    EXPECT_LE(std::abs(a[i] - b[i]) / scale, 1e-5) << i;
    EXPECT_LE(std::abs(a[i] - c[i]) / scale, 1e-5) << i;
  }
  EXPECT_EQ(c, d) << "the same topology must repeat bit for bit";
  // The rendezvous keys of ended jobs are dropped.
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::ClusterState> state = coordinator_->State();
        return state.ok() && state->store_keys() == 0;
      },
      absl::Seconds(10)));
}

TEST_F(JobsE2eTest, EveryCrossDeviceOpLearnsTheSameWeights) {
  std::vector<std::vector<double>> params;
  for (Communication c : {Communication::kRing, Communication::kHierarchical,
                          Communication::kReductionToOneDevice}) {
    JobSpec spec = LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 40);
    spec.communication = c;
    const v1::JobStatus status = Run(spec);
    ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
    EXPECT_EQ(status.spec().communication(),
              c == Communication::kRing ? v1::COMMUNICATION_RING
              : c == Communication::kHierarchical
                  ? v1::COMMUNICATION_HIERARCHICAL
                  : v1::COMMUNICATION_REDUCTION_TO_ONE_DEVICE);
    EXPECT_THAT(status.communication_note(), HasSubstr("as requested"));
    params.push_back(LinearParameters(status));
    ASSERT_EQ(params.back().size(), 5u);
  }
  // The sums differ in order only.
  for (size_t k = 1; k < params.size(); ++k) {
    for (size_t i = 0; i < params[0].size(); ++i) {
      const double scale = std::max(std::abs(params[0][i]), 1e-12);
      EXPECT_LE(std::abs(params[k][i] - params[0][i]) / scale, 1e-6)
          << "communication " << k << ", parameter " << i;
    }
  }
}

TEST_F(JobsE2eTest, CentralStorageMlpLearnsAndMatchesMirrored) {
  // Both on the first agent's 2 devices: 2 replicas, reading one copy of the
  // variables or each its own.
  const v1::JobStatus central =
      Run(MlpJob(StrategyKind::kCentralStorage, 400, "auto"));
  const v1::JobStatus mirrored =
      Run(MlpJob(StrategyKind::kMirrored, 400, "auto"));
  ASSERT_EQ(central.state(), v1::JOB_SUCCEEDED) << central.error();
  ASSERT_EQ(mirrored.state(), v1::JOB_SUCCEEDED) << mirrored.error();
  EXPECT_EQ(central.num_replicas(), 2);
  EXPECT_GE(central.metrics().at("accuracy"), kMlpAccuracyBar);

  // The same parameters (and optimizer slots) as the mirrored copies.
  const Checkpoint a = Final(central);
  const Checkpoint b = Final(mirrored);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  ASSERT_TRUE(a.tensors.count("dense0/kernel"));
  for (const auto& [name, tensor] : b.tensors) {
    SCOPED_TRACE(name);
    auto it = a.tensors.find(name);
    ASSERT_NE(it, a.tensors.end());
    ASSERT_EQ(it->second.dtype, tensor.dtype);
    if (tensor.dtype != "float32") {
      EXPECT_EQ(it->second.bytes, tensor.bytes);
      continue;
    }
    const std::span<const float> got = it->second.As<float>();
    const std::span<const float> want = tensor.As<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double scale = std::max(std::abs(double{want[i]}), 1e-6);
      EXPECT_LE(std::abs(double{got[i]} - want[i]) / scale, 1e-5) << i;
    }
  }

  EXPECT_EQ(central.placement_size(), 1);
}

// The linear job at 10 ms a step until `gate` exists, then at full speed:
// long enough to lose an agent mid-job however busy the machine is, and
// quick to finish once the test has acted. Restarts to spend, and no
// checkpoints by steps.
JobSpec SlowLinearJob(const std::string& gate) {
  JobSpec spec = LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 1500);
  spec.max_restarts = 2;
  spec.config_json = std::string(kLinearConfig)
                         .replace(1, 0,
                                  absl::StrCat(R"("step_sleep_ms": 10, )",
                                               R"("step_sleep_until_file": ")",
                                               gate, R"(", )"));
  return spec;
}

// A gate file of this test's own. It opens when the test says, or when the
// test ends however it ends, so that a failed test leaves no slow job
// ahead of the next ones on the shared cluster.
class Gate {
 public:
  explicit Gate(const ScratchDir& dir)
      : path_(absl::StrCat(
            dir.path(), "/gate-",
            ::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  ~Gate() { Open(); }
  const std::string& path() const { return path_; }
  void Open() const { EXPECT_TRUE(WriteFileAtomically(path_, "").ok()); }

 private:
  const std::string path_;
};

void ExpectTrueWeights(const v1::JobStatus& status) {
  const std::vector<double> params = LinearParameters(status);
  ASSERT_EQ(params.size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(params[i], kTrueW[i], 1e-3) << i;
  EXPECT_NEAR(params[4], kTrueB, 1e-3);
}

// Submits `spec` and waits, up to 30 s, until its status satisfies `until`;
// the job's id, or "" after a test failure.
std::string SubmitAndWaitUntil(
    Client& client, const JobSpec& spec,
    const std::function<bool(const v1::JobStatus&)>& until) {
  absl::StatusOr<std::string> id = client.SubmitJob(spec);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return "";
  const bool reached = WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> s = client.GetJob(*id);
        return s.ok() && until(*s);
      },
      absl::Seconds(30));
  EXPECT_TRUE(reached) << "job " << *id;
  return reached ? *id : "";
}

// Sends `signal` to worker:0, by the pid the coordinator reports.
void SignalWorker(CoordinatorProcess& coordinator, int signal) {
  absl::StatusOr<v1::ClusterState> state = coordinator.State();
  ASSERT_TRUE(state.ok()) << state.status();
  const v1::TaskStatus* worker = FindTask(*state, "worker", 0);
  ASSERT_NE(worker, nullptr);
  ASSERT_EQ(kill(static_cast<pid_t>(worker->pid()), signal), 0);
}

TEST_F(JobsE2eTest, KilledWorkerAgentRestartsTheJobFromItsCheckpoint) {
  const Gate gate(*dir_);
  JobSpec spec = SlowLinearJob(gate.path());
  spec.checkpoint_every = 20;
  const std::string id = SubmitAndWaitUntil(
      *client_, spec,
      [](const v1::JobStatus& s) { return s.checkpoint_step() >= 40; });
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(SignalWorker(*coordinator_, SIGKILL));
  gate.Open();

  // The chief's replicas stop: the attempt ends, the job waits.
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> s = client_->GetJob(id);
        return s.ok() && s->restarts_size() >= 1;
      },
      absl::Seconds(30)))
      << "the job did not notice the lost agent in 30 s";

  const v1::JobStatus status = WaitForEnd(id, absl::Seconds(60));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  ASSERT_GE(status.restarts_size(), 1);
  EXPECT_THAT(status.restarts(0).cause(), HasSubstr("worker:0 died"));
  EXPECT_GE(status.restarts(0).resumed_from_step(), 40);
  ExpectTrueWeights(status);
}

TEST_F(JobsE2eTest, ACheckpointIntervalBoundsWhatAKilledAgentCosts) {
  const Gate gate(*dir_);
  JobSpec spec = SlowLinearJob(gate.path());
  spec.checkpoint_interval = absl::Seconds(-1);
  EXPECT_THAT(client_->SubmitJob(spec).status().message(),
              HasSubstr("checkpoint_interval: must be a finite duration, 0 "
                        "(no time-based ones) or 1ms or more, got -1s"));
  // Carried in whole milliseconds, it would arrive as 0: none at all.
  spec.checkpoint_interval = absl::Microseconds(500);
  EXPECT_THAT(client_->SubmitJob(spec).status().message(),
              HasSubstr("checkpoint_interval: must be a finite duration, 0 "
                        "(no time-based ones) or 1ms or more, got 500us"));
  spec.checkpoint_interval = absl::Milliseconds(100);
  spec.strategy = StrategyKind::kParameterServer;
  EXPECT_THAT(client_->SubmitJob(spec).status().message(),
              HasSubstr("checkpoint_interval_ms applies to the synchronous "
                        "strategies"));

  // The checkpoints before the end come from the interval alone.
  spec.strategy = StrategyKind::kMultiWorkerMirrored;
  const std::string id = SubmitAndWaitUntil(
      *client_, spec,
      [](const v1::JobStatus& s) { return s.checkpoint_step() >= 40; });
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(SignalWorker(*coordinator_, SIGKILL));
  gate.Open();

  const v1::JobStatus status = WaitForEnd(id, absl::Seconds(60));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  ASSERT_GE(status.restarts_size(), 1);
  EXPECT_GE(status.restarts(0).resumed_from_step(), 40);
  EXPECT_EQ(status.spec().checkpoint_interval_ms(), 100);
}

TEST_F(JobsE2eTest, ASigtermedAgentHasEveryReplicaCheckpointBeforeItLeaves) {
  // No checkpoints but the one the shutdown asks for, and no restarts
  // allowed: a stop that loses nothing is not a failure.
  const Gate gate(*dir_);
  JobSpec spec = SlowLinearJob(gate.path());
  spec.max_restarts = 0;
  // How long the job waits for the agent to come back is its own to set.
  spec.placement_timeout = absl::Seconds(-1);
  EXPECT_THAT(client_->SubmitJob(spec).status().message(),
              HasSubstr("placement_timeout: must be a finite duration"));
  spec.placement_timeout = absl::Minutes(5);
  const std::string id = SubmitAndWaitUntil(
      *client_, spec, [](const v1::JobStatus& s) { return s.step() >= 40; });
  ASSERT_FALSE(id.empty());
  ASSERT_NO_FATAL_FAILURE(SignalWorker(*coordinator_, SIGTERM));
  gate.Open();

  // The supervisor relaunches the worker; the job waits for it.
  const v1::JobStatus status = WaitForEnd(id, absl::Seconds(60));
  ASSERT_EQ(status.state(), v1::JOB_SUCCEEDED) << status.error();
  ASSERT_EQ(status.restarts_size(), 1);
  EXPECT_GE(status.restarts(0).resumed_from_step(), 40)
      << status.restarts(0).cause();
  EXPECT_THAT(status.restarts(0).cause(),
              HasSubstr("worker:0 stopped: deregistered: signal 15"));
  EXPECT_FALSE(status.restarts(0).spent());
  EXPECT_EQ(status.spec().placement_timeout_ms(), 5 * 60 * 1000);
  ExpectTrueWeights(status);
}

struct BadJob {
  std::string name;
  std::function<JobSpec(const ScratchDir&)> spec;
  std::string error;
};

TEST_F(JobsE2eTest, BadJobsFailWithAReasonAndTheClusterRunsTheNextJob) {
  const std::vector<BadJob> cases = {
      {"not a shared library",
       [](const ScratchDir& dir) {
         JobSpec spec = LinearJob(StrategyKind::kOneDevice, 0, 5);
         spec.library_path = dir.Write("libnotes.so", "just some text\n");
         return spec;
       },
       "not a loadable shared library"},
      {"no step symbol",
       [](const ScratchDir&) {
         JobSpec spec = LinearJob(StrategyKind::kOneDevice, 0, 5);
         spec.library_path = TestLibrary("cohort_test_plain");
         spec.init_fn = spec.dataset_fn = "";
         return spec;
       },
       "not a Cohort step library"},
      {"API version mismatch",
       [](const ScratchDir&) {
         JobSpec spec = LinearJob(StrategyKind::kOneDevice, 0, 5);
         spec.library_path = TestLibrary("cohort_test_old_api_steps");
         spec.init_fn = spec.dataset_fn = "";
         spec.step_fn = "step";
         return spec;
       },
       "built against step API version 99"},
      {"unknown step name",
       [](const ScratchDir&) {
         JobSpec spec = LinearJob(StrategyKind::kOneDevice, 0, 5);
         spec.step_fn = "linear_stepp";
         return spec;
       },
       "no step function named \"linear_stepp\""},
      {"batch not divisible",
       [](const ScratchDir&) {
         // Every device of each agent (4), known only at placement: with a
         // set devices_per_agent the submission itself is refused.
         JobSpec spec = LinearJob(StrategyKind::kMultiWorkerMirrored, 2, 5);
         spec.global_batch_size = 10;
         spec.devices_per_agent = 0;
         return spec;
       },
       "global batch size 10 is not divisible by the 8 replicas (2 agent(s) "
       "x 4 device(s))"},
      {"FILE sharding with one file",
       [](const ScratchDir& dir) {
         const std::string data = dir.path() + "/one-file";
         RunCommand({Binary("cohort-example-mlp-data"), "--out=" + data,
                     "--files=1", "--examples=512"});
         return JobSpec{
             .library_path = Library("cohort_example_mlp"),
             .init_fn = "mlp_init",
             .step_fn = "mlp_step",
             .dataset_fn = "mlp_data",
             .steps = 5,
             .global_batch_size = 8,
             .config_json = absl::StrCat(R"({"data_dir": ")", data,
                                         R"(", "shard_policy": "file"})"),
             .devices_per_agent = 1};
       },
       "kData"},
      {"step returns an error",
       [](const ScratchDir&) {
         return JobSpec{.library_path = TestLibrary("cohort_test_steps"),
                        .step_fn = "fail_step",
                        .steps = 10,
                        .global_batch_size = 4,
                        .max_restarts = 2,
                        .devices_per_agent = 2};
       },
       "the loss became NaN at step 3"},
      {"a checkpoint_dir that cannot be written",
       [](const ScratchDir&) {
         // Found before the first step, not at the end of a long job.
         JobSpec spec =
             LinearJob(StrategyKind::kMultiWorkerMirrored, 1, 100'000'000);
         spec.checkpoint_dir = "/proc/cohort-not-writable";
         spec.max_restarts = 2;
         return spec;
       },
       "checkpoint_dir /proc/cohort-not-writable: cannot create directory"},
      {"step's error and metric name are not UTF-8",
       [](const ScratchDir&) {
         return JobSpec{.strategy = StrategyKind::kOneDevice,
                        .library_path = TestLibrary("cohort_test_steps"),
                        .step_fn = "garbled_step",
                        .steps = 10,
                        .global_batch_size = 4};
       },
       "record header \xef\xbf\xbd\xef\xbf\xbd at step 3"},
      {"step throws an exception",
       [](const ScratchDir&) {
         return JobSpec{.library_path = TestLibrary("cohort_test_steps"),
                        .step_fn = "throw_step",
                        .steps = 10,
                        .global_batch_size = 4,
                        .max_restarts = 2,
                        .devices_per_agent = 2};
       },
       "threw an exception: shape mismatch at step 3"},
      {"step crashes the agent",
       [](const ScratchDir&) {
         return JobSpec{.library_path = TestLibrary("cohort_test_steps"),
                        .step_fn = "crash_step",
                        .steps = 10,
                        .global_batch_size = 4,
                        .max_restarts = 1,
                        .devices_per_agent = 2};
       },
       "worker:0 died: process killed by signal 11"},
  };
  for (const BadJob& bad : cases) {
    SCOPED_TRACE(bad.name);
    const v1::JobStatus status = Run(bad.spec(*dir_));
    EXPECT_EQ(status.state(), v1::JOB_FAILED)
        << v1::JobState_Name(status.state());
    EXPECT_THAT(status.error(), HasSubstr(bad.error));
  }
  ASSERT_TRUE(coordinator_->WaitAllReady(absl::Seconds(20)).ok());
  const v1::JobStatus next = Run(LinearJob(StrategyKind::kOneDevice, 0, 5));
  EXPECT_EQ(next.state(), v1::JOB_SUCCEEDED) << next.error();
}

TEST_F(JobsE2eTest, CohortctlSubmitWaitShowsProgressAndJobJsonHasTheStatus) {
  const std::vector<std::string> submit = {
      Binary("cohortctl"),
      "--coordinator=" + coordinator_->address(),
      "submit",
      "--library=" + Library("cohort_example_linear"),
      "--init=linear_init",
      "--step=linear_step",
      "--dataset=linear_data",
      "--steps=200",
      "--global_batch=64",
      "--devices_per_agent=2",
      std::string("--config=") +
          R"({"dim": 4, "step_sleep_ms": 5, "true_w": [1, 2, 3, 4]})",
      "--wait"};
  // Not a terminal: plain progress lines, then the summary.
  CommandResult plain = RunCommand(submit, absl::Seconds(60));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr("steps/s"));
  EXPECT_THAT(plain.output, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(plain.output, ::testing::Not(HasSubstr("\r")));

  // On a terminal (script(1) gives it one): a bar redrawn in place.
  std::string line;
  for (const std::string& arg : submit) absl::StrAppend(&line, "'", arg, "' ");
  CommandResult tty =
      RunCommand({"/usr/bin/script", "-qfec", line, "/dev/null"},
                 absl::Seconds(60), {{"TERM", "xterm"}});
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_THAT(tty.output, HasSubstr("\r\x1B[K["));
  EXPECT_THAT(tty.output, HasSubstr("#"));

  absl::StatusOr<std::vector<v1::JobStatus>> jobs = client_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_FALSE(jobs->empty());
  CommandResult json = RunCommand({Binary("cohortctl"),
                                   "--coordinator=" + coordinator_->address(),
                                   "job", jobs->back().job_id(), "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.output;
  for (const char* field : {"state", "step", "metrics", "loss", "restarts"}) {
    EXPECT_THAT(json.output, HasSubstr(field));
  }
  EXPECT_THAT(json.output,
              ::testing::ContainsRegex("steps_?[pP]er_?[sS]econd"));

  // Output that cannot be written (a full disk) is a failure, not exit 0
  // with the table cut short.
  for (const char* command : {"jobs", "logs coordinator"}) {
    SCOPED_TRACE(command);
    const CommandResult full =
        RunCommand({"/bin/sh", "-c",
                    absl::StrCat(Binary("cohortctl"),
                                 " --coordinator=", coordinator_->address(),
                                 " ", command, " >/dev/full")});
    EXPECT_EQ(full.exit_code, 1) << full.output;
    EXPECT_THAT(full.output, HasSubstr("cohortctl: cannot write its output"));
  }
}

TEST_F(JobsE2eTest, ASubmissionRepeatedWithItsIdIsOneJob) {
  auto submit = [&](const std::string& steps) {
    return RunCommand(
        {Binary("cohortctl"), "--coordinator=" + coordinator_->address(),
         "submit", "--library=" + Library("cohort_example_linear"),
         "--init=linear_init", "--step=linear_step", "--dataset=linear_data",
         "--steps=" + steps, "--global_batch=64", "--devices_per_agent=2",
         "--submission_id=once-only"},
        absl::Seconds(60));
  };
  const CommandResult first = submit("20");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const CommandResult again = submit("20");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output, first.output);  // the job's id
  const std::string id(absl::StripAsciiWhitespace(first.output));

  const CommandResult other = submit("30");
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_THAT(other.output,
              HasSubstr(absl::StrCat("submission_id \"once-only\" was given "
                                     "to job ",
                                     id, ", whose spec differs")));
  const v1::JobStatus ended = WaitForJobEnd(*client_, id, absl::Seconds(60));
  EXPECT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
  absl::StatusOr<std::vector<v1::JobStatus>> jobs = client_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(std::count_if(jobs->begin(), jobs->end(),
                          [](const v1::JobStatus& job) {
                            return job.spec().submission_id() == "once-only";
                          }),
            1);
}

// Runs `cohortctl submit --wait` of a job that runs until cancelled, with
// SIGINT ignored or not as `sigint_ignored`; once the job runs and is
// watched, sends cohortctl SIGINT. Returns how cohortctl ended by then
// (nullopt: still running), what it printed, and the job's id.
struct Interrupted {
  std::optional<ExitStatus> ended;
  std::string printed;
  std::string id;
};
Interrupted InterruptSubmitWait(const std::string& coordinator, Client& client,
                                const ScratchDir& dir, const Gate& gate,
                                bool sigint_ignored) {
  const std::string output =
      absl::StrCat(dir.path(), "/submit-", sigint_ignored, ".out");
  std::string command = "exec";
  for (const std::string& arg : std::vector<std::string>{
           Binary("cohortctl"), "--coordinator=" + coordinator, "submit",
           "--library=" + Library("cohort_example_linear"),
           "--init=linear_init", "--step=linear_step", "--dataset=linear_data",
           // Far more steps than the test takes, even on a slow machine:
           // the test cancels the job.
           "--steps=1000000", "--global_batch=64", "--devices_per_agent=2",
           absl::StrCat(R"(--config={"dim": 4, "step_sleep_ms": 10, )",
                        R"("step_sleep_until_file": ")", gate.path(),
                        R"(", "true_w": [1, 2, 3, 4]})"),
           "--wait"}) {
    absl::StrAppend(&command, " '", arg, "'");
  }
  // An ignored SIGINT is inherited through exec, as from a shell that runs
  // a command in the background without job control.
  if (sigint_ignored) command = "trap '' INT; " + command;
  absl::StatusOr<Subprocess> submit = Subprocess::Spawn(
      {.argv = {"/bin/sh", "-c", command}, .output_file = output});
  EXPECT_TRUE(submit.ok()) << submit.status();
  if (!submit.ok()) return {};
  absl::Cleanup stop = [&] { submit->Stop(absl::Seconds(5)); };
  // Running, and watched: after "job N submitted", the watch's own first
  // line ("job N SUBMITTED", or a later state) has been printed.
  Interrupted result;
  const bool watched = WaitUntil(
      [&] {
        absl::StatusOr<std::vector<v1::JobStatus>> jobs = client.ListJobs();
        if (!jobs.ok() || jobs->empty()) return false;
        const v1::JobStatus& last = jobs->back();
        if (last.state() != v1::JOB_RUNNING || last.step() < 1) return false;
        absl::StatusOr<std::string> printed = ReadFile(output);
        if (!printed.ok() ||
            !absl::StrContains(*printed,
                               absl::StrCat("\njob ", last.job_id(), " "))) {
          return false;
        }
        result.id = last.job_id();
        return true;
      },
      absl::Seconds(30));
  EXPECT_TRUE(watched) << "the submitted job was not running and watched";
  if (!watched) return result;
  submit->Signal(SIGINT);
  // Ignored, it would end only when the job does; 2 s show it did not.
  result.ended =
      submit->Wait(sigint_ignored ? absl::Seconds(2) : absl::Seconds(10));
  result.printed = ReadFile(output).value_or("");
  return result;
}

TEST_F(JobsE2eTest, CtrlCOnSubmitWaitSaysTheJobGoesOnAndHowToReachIt) {
  const Gate gate(*dir_);
  const Interrupted interrupted = InterruptSubmitWait(
      coordinator_->address(), *client_, *dir_, gate, /*sigint_ignored=*/false);
  ASSERT_FALSE(interrupted.id.empty());
  const std::string& id = interrupted.id;
  ASSERT_TRUE(interrupted.ended.has_value()) << "cohortctl ignored SIGINT";
  EXPECT_TRUE(interrupted.ended->signaled() &&
              interrupted.ended->term_signal() == SIGINT)
      << interrupted.ended->ToString();
  EXPECT_THAT(
      interrupted.printed,
      HasSubstr(absl::StrCat(
          "cohortctl: interrupted; job ", id, " goes on: `cohortctl watch ", id,
          "` follows it, `cohortctl cancel ", id, "` stops it")));

  // It does go on, until cancelled.
  absl::StatusOr<v1::JobStatus> after = client_->GetJob(id);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), v1::JOB_RUNNING);
  ASSERT_TRUE(client_->CancelJob(id).ok());
  gate.Open();
  EXPECT_EQ(WaitForEnd(id, absl::Seconds(60)).state(), v1::JOB_CANCELLED);
}

// A SIGINT its caller ignores stays ignored: the watch goes on.
TEST_F(JobsE2eTest, AnIgnoredSigintLeavesSubmitWaitWatching) {
  const Gate gate(*dir_);
  const Interrupted interrupted = InterruptSubmitWait(
      coordinator_->address(), *client_, *dir_, gate, /*sigint_ignored=*/true);
  ASSERT_FALSE(interrupted.id.empty());
  EXPECT_FALSE(interrupted.ended.has_value())
      << interrupted.ended->ToString() << "\n"
      << interrupted.printed;
  EXPECT_THAT(interrupted.printed, ::testing::Not(HasSubstr("interrupted")));
  ASSERT_TRUE(client_->CancelJob(interrupted.id).ok());
  gate.Open();
  EXPECT_EQ(WaitForEnd(interrupted.id, absl::Seconds(60)).state(),
            v1::JOB_CANCELLED);
}

TEST_F(JobsE2eTest, RestartedCoordinatorStillListsTheJobs) {
  // Covered with a coordinator of its own, so as not to disturb the others.
  ScratchDir dir;
  const std::string state = dir.path() + "/state";
  std::string id;
  {
    absl::StatusOr<ReadyCluster> cluster =
        StartReadyCluster(dir, 1, 0, {"--state_dir=" + state});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    std::unique_ptr<Client> client =
        *Client::Connect(cluster->coordinator->address());
    absl::StatusOr<std::string> submitted =
        client->SubmitJob(LinearJob(StrategyKind::kOneDevice, 0, 5));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    id = *submitted;
    ASSERT_TRUE(WaitUntil(
        [&] {
          absl::StatusOr<v1::JobStatus> s = client->GetJob(id);
          return s.ok() && s->state() == v1::JOB_SUCCEEDED;
        },
        absl::Seconds(30)));
  }
  absl::StatusOr<ReadyCluster> again =
      StartReadyCluster(dir, 1, 0, {"--state_dir=" + state});
  ASSERT_TRUE(again.ok()) << again.status();
  std::unique_ptr<Client> client =
      *Client::Connect(again->coordinator->address());
  absl::StatusOr<v1::JobStatus> status = client->GetJob(id);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), v1::JOB_SUCCEEDED);
}

TEST_F(JobsE2eTest, AnAcknowledgedSubmissionSurvivesACoordinatorKilledAtOnce) {
  ScratchDir dir;
  const std::string state = dir.path() + "/state";
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, {"--state_dir=" + state});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<Client> client =
      *Client::Connect(cluster->coordinator->address());
  absl::StatusOr<std::string> id =
      client->SubmitJob(LinearJob(StrategyKind::kOneDevice, 0, 5));
  ASSERT_TRUE(id.ok()) << id.status();
  // Before the job loop's next tick could have saved the table.
  cluster->coordinator->process().Signal(SIGKILL);
  ASSERT_TRUE(
      cluster->coordinator->process().Wait(absl::Seconds(10)).has_value());

  // The next coordinator of the state dir adopts the tasks and runs it.
  absl::StatusOr<ReadyCluster> again =
      StartReadyCluster(dir, 1, 0, {"--state_dir=" + state});
  ASSERT_TRUE(again.ok()) << again.status();
  client = *Client::Connect(again->coordinator->address());
  absl::StatusOr<v1::JobStatus> status = client->GetJob(*id);
  ASSERT_TRUE(status.ok()) << status.status();
  const v1::JobStatus ended = WaitForJobEnd(*client, *id, absl::Seconds(60));
  EXPECT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
}

TEST_F(JobsE2eTest, AClusterStoppedMidJobResumesItFromTheStepItStoppedAt) {
  ScratchDir dir;
  const std::string state = dir.path() + "/state";
  absl::StatusOr<ReadyCluster> cluster =
      StartReadyCluster(dir, 1, 0, {"--state_dir=" + state, "--cpu_devices=2"});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<Client> client =
      *Client::Connect(cluster->coordinator->address());
  // No checkpoints by steps, and no restarts to spend.
  const Gate gate(dir);
  JobSpec spec = SlowLinearJob(gate.path());
  spec.max_restarts = 0;
  const std::string id = SubmitAndWaitUntil(
      *client, spec, [](const v1::JobStatus& s) { return s.step() >= 40; });
  ASSERT_FALSE(id.empty());
  // As `cohortctl up` on Ctrl-C: the coordinator stops its tasks.
  cluster->coordinator->process().Signal(SIGTERM);
  ASSERT_TRUE(
      cluster->coordinator->process().Wait(absl::Seconds(15)).has_value());
  gate.Open();

  absl::StatusOr<ReadyCluster> again =
      StartReadyCluster(dir, 1, 0, {"--state_dir=" + state, "--cpu_devices=2"});
  ASSERT_TRUE(again.ok()) << again.status();
  client = *Client::Connect(again->coordinator->address());
  const v1::JobStatus ended = WaitForJobEnd(*client, id, absl::Seconds(60));
  ASSERT_EQ(ended.state(), v1::JOB_SUCCEEDED) << ended.error();
  ASSERT_GE(ended.restarts_size(), 1);
  const v1::RestartRecord& resumed = ended.restarts(ended.restarts_size() - 1);
  EXPECT_GE(resumed.resumed_from_step(), 40) << resumed.cause();
  EXPECT_FALSE(resumed.spent()) << resumed.cause();
}

}  // namespace
}  // namespace cohort::testing
