#include "tests/testing/jobs.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "examples/mlp/mlp_config.h"
#include "examples/mlp/mlp_model.h"
#include "gtest/gtest.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

// Every variable and slot of a checkpoint, as raw bytes by name.
std::map<std::string, std::string> Tensors(const v1::JobStatus& status) {
  absl::StatusOr<Checkpoint> checkpoint =
      LoadLatestCheckpoint(status.checkpoint_dir());
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::map<std::string, std::string> out;
  if (!checkpoint.ok()) return out;
  for (const auto& [name, tensor] : checkpoint->tensors) {
    out[name] = tensor.bytes;
  }
  return out;
}

}  // namespace

v1::JobStatus RunOnOneHost(const JobSpec& spec, int workers,
                           const ScratchDir& dir) {
  absl::StatusOr<ReadyCluster> local = StartReadyCluster(
      dir, workers, /*ps=*/0,
      {"--cpu_devices=2", absl::StrCat("--state_dir=", dir.path(), "/state")});
  EXPECT_TRUE(local.ok()) << local.status();
  if (!local.ok()) return {};
  auto client = Client::Connect(local->coordinator->address());
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  absl::StatusOr<std::string> id = (*client)->SubmitJob(spec);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return {};
  return WaitForJobEnd(**client, *id, absl::Seconds(120));
}

void ExpectSameVariables(const v1::JobStatus& a, const v1::JobStatus& b,
                         const std::string& what) {
  const auto ours = Tensors(a);
  const auto theirs = Tensors(b);
  ASSERT_FALSE(ours.empty());
  EXPECT_EQ(ours.size(), theirs.size());
  for (const auto& [name, bytes] : ours) {
    ASSERT_TRUE(theirs.count(name)) << name;
    EXPECT_TRUE(bytes == theirs.at(name)) << name << " differs " << what;
  }
}

std::vector<double> LinearParameters(const v1::JobStatus& status) {
  absl::StatusOr<Checkpoint> checkpoint =
      LoadLatestCheckpoint(status.checkpoint_dir());
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::vector<double> params;
  if (!checkpoint.ok()) return params;
  for (const char* name : {"w", "b"}) {
    auto it = checkpoint->tensors.find(name);
    if (it == checkpoint->tensors.end()) {
      ADD_FAILURE() << "no " << name << " in the checkpoint";
      continue;
    }
    for (double v : it->second.As<double>()) params.push_back(v);
  }
  return params;
}

double FinalMlpAccuracy(Client& client, const std::string& job_id,
                        const JobSpec& spec) {
  absl::StatusOr<examples::MlpConfig> config =
      examples::ParseMlpConfig(spec.config_json);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return -1;
  absl::StatusOr<std::map<std::string, HostTensor>> variables =
      client.FetchVariables(job_id);
  EXPECT_TRUE(variables.ok()) << variables.status();
  if (!variables.ok()) return -1;
  std::vector<std::span<const float>> params;
  for (int k = 0; k < examples::kMlpLayers; ++k) {
    for (const char* what : {"kernel", "bias"}) {
      const std::string name = absl::StrCat("dense", k, "/", what);
      auto it = variables->find(name);
      if (it == variables->end() || it->second.dtype != "float32") {
        ADD_FAILURE() << "job " << job_id << " has no float32 " << name;
        return -1;
      }
      params.push_back(it->second.As<float>());
    }
  }
  absl::StatusOr<double> accuracy = examples::MlpAccuracy(
      config->hidden, params,
      examples::HeldOutShard(*config, spec.seed, /*replica=*/0,
                             /*num_replicas=*/1));
  EXPECT_TRUE(accuracy.ok()) << accuracy.status();
  return accuracy.value_or(-1);
}

absl::Status WriteSpirals(const std::string& dir) {
  const CommandResult made = RunCommand(
      {Binary("cohort-example-mlp-data"), "--out=" + dir, "--files=4"});
  if (made.exit_code == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cohort-example-mlp-data failed: ", made.output));
}

v1::JobStatus WaitForEvaluation(Client& client, const std::string& id,
                                int64_t step, absl::Duration timeout) {
  return WaitForJob(
      client, id,
      [step](const v1::JobStatus& s) {
        return s.evaluations_size() > 0 &&
               s.evaluations(s.evaluations_size() - 1).step() == step;
      },
      timeout);
}

std::string ExampleLibrary(const std::string& name) {
  return absl::StrCat(BinDir(), "/../lib/lib", name, ".so");
}

std::string TestStepsLibrary() {
  return TestBinary("libcohort_test_steps.so");
}

JobSpec MlpJob(const std::string& data_dir, StrategyKind strategy,
               int64_t steps, const std::string& shard_policy) {
  return JobSpec{.name = "mlp",
                 .strategy = strategy,
                 .library_path = ExampleLibrary("cohort_example_mlp"),
                 .init_fn = "mlp_init",
                 .step_fn = "mlp_step",
                 .dataset_fn = "mlp_data",
                 .steps = steps,
                 .global_batch_size = 128,
                 .seed = 3,
                 .config_json = absl::StrCat(R"({"data_dir": ")", data_dir,
                                             R"(", "shard_policy": ")",
                                             shard_policy, R"("})"),
                 .devices_per_agent = 2};
}

JobSpec SlowLinearJob(StrategyKind strategy, int64_t steps, int step_sleep_ms) {
  return JobSpec{.name = "linear",
                 .strategy = strategy,
                 .library_path = ExampleLibrary("cohort_example_linear"),
                 .init_fn = "linear_init",
                 .step_fn = "linear_step",
                 .dataset_fn = "linear_data",
                 .steps = steps,
                 .global_batch_size = 96,
                 .seed = 7,
                 .config_json = absl::StrCat(
                     R"({"dim": 4, "num_examples": 1024, "step_sleep_ms": )",
                     step_sleep_ms,
                     R"(, "true_w": [0.5, -1.25, 2.0, 0.75], "true_b": 0.3,
              "learning_rate": 0.1, "shard_policy": "data"})"),
                 .devices_per_agent = 2};
}

bool JobEnded(const v1::JobStatus& status) {
  return status.state() == v1::JOB_SUCCEEDED ||
         status.state() == v1::JOB_FAILED ||
         status.state() == v1::JOB_CANCELLED;
}

v1::JobStatus WaitForJob(
    Client& client, const std::string& id,
    const std::function<bool(const v1::JobStatus&)>& condition,
    absl::Duration timeout) {
  v1::JobStatus last;
  WaitUntil(
      [&] {
        absl::StatusOr<v1::JobStatus> status = client.GetJob(id);
        if (status.ok()) last = *status;
        return status.ok() && condition(last);
      },
      timeout, absl::Milliseconds(100));
  return last;
}

v1::JobStatus WaitForStep(Client& client, const std::string& id, int64_t step,
                          absl::Duration timeout) {
  return WaitForJob(
      client, id,
      [step](const v1::JobStatus& s) {
        return s.step() >= step || JobEnded(s);
      },
      timeout);
}

v1::JobStatus WaitForJobEnd(Client& client, const std::string& id,
                            absl::Duration timeout) {
  return WaitForJob(client, id, JobEnded, timeout);
}

}  // namespace cohort::testing
