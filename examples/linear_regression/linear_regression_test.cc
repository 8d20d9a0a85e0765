#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "examples/testing/fake_job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::examples {
namespace {

using ::cohort::examples::testing::FakeJobOptions;
using ::cohort::examples::testing::FakeJobResult;
using ::cohort::examples::testing::RunFakeJob;
using ::cohort::examples::testing::StepLibrary;
using ::testing::HasSubstr;

const StepLibrary& Library() {
  return StepLibrary::OpenOnce(COHORT_EXAMPLE_LINEAR_LIBRARY);
}

FakeJobOptions Job(int replicas, const std::string& config) {
  return {.init_fn = "linear_init",
          .step_fn = "linear_step",
          .dataset_fn = "linear_data",
          .replicas = replicas,
          .steps = 300,
          .global_batch_size = 64,
          .seed = 7,
          .config_json = config};
}

double MaxError(const FakeJobResult& result, const std::vector<double>& true_w,
                double true_b) {
  const std::vector<double>& w = result.variables[0].at("w");
  double error = std::abs(result.variables[0].at("b")[0] - true_b);
  for (size_t i = 0; i < w.size(); ++i) {
    error = std::max(error, std::abs(w[i] - true_w[i]));
  }
  return error;
}

TEST(LinearRegressionTest, ConvergesToTheTrueWeights) {
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), Job(4, "{}"));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> true_w = {0.5, -0.75, 1.0, -1.25,
                                      1.5, -1.75, 2.0, -2.25};
  EXPECT_LT(MaxError(*result, true_w, 0.3), 1e-3);
  EXPECT_LT(result->Last("max_weight_error"), 1e-3);
  EXPECT_EQ(result->metrics.at("max_weight_error").front().first, 299);
  EXPECT_EQ(result->metrics.at("loss").size(), 300u);
  EXPECT_LT(result->Last("loss"), 1e-6);
  // Mirrored variables stay bitwise equal.
  for (size_t r = 1; r < result->variables.size(); ++r) {
    EXPECT_EQ(result->variables[r], result->variables[0]) << "replica " << r;
  }
}

TEST(LinearRegressionTest, ReplicaCountsAgree) {
  const std::string config = R"({"dim": 5, "optimizer": "momentum",
                                 "learning_rate": 0.05})";
  FakeJobOptions job = Job(1, config);
  job.steps = 40;  // far from converged, where a difference would show
  absl::StatusOr<FakeJobResult> one = RunFakeJob(Library(), job);
  ASSERT_TRUE(one.ok()) << one.status();
  for (int replicas : {2, 4, 8}) {
    job.replicas = replicas;
    absl::StatusOr<FakeJobResult> many = RunFakeJob(Library(), job);
    ASSERT_TRUE(many.ok()) << many.status();
    for (const char* name : {"w", "b"}) {
      const std::vector<double>& a = one->variables[0].at(name);
      const std::vector<double>& b = many->variables[0].at(name);
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(b[i], a[i], 1e-5 * std::abs(a[i]))
            << name << "[" << i << "], " << replicas << " replicas";
      }
    }
  }
}

TEST(LinearRegressionTest, EveryOptimizerConverges) {
  for (const char* config :
       {R"({"optimizer": "sgd"})",
        R"({"optimizer": "momentum", "learning_rate": 0.05})",
        R"({"optimizer": "adam", "learning_rate": 0.02})"}) {
    FakeJobOptions job = Job(2, config);
    job.steps = 600;
    absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_LT(result->Last("max_weight_error"), 1e-3) << config;
  }
}

TEST(LinearRegressionTest, TrueWeightsFromTheConfig) {
  absl::StatusOr<FakeJobResult> result = RunFakeJob(
      Library(), Job(2, R"({"dim": 3, "true_w": [1, -2, 0.5], "true_b": -1,
                 "num_examples": 512, "shuffle": true})"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(MaxError(*result, {1, -2, 0.5}, -1), 1e-3);
}

TEST(LinearRegressionTest, BadConfigNamesTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"dim": "eight"})", "\"dim\""},
      {R"({"dim": 0})", "\"dim\""},
      {R"({"num_examples": -1})", "\"num_examples\""},
      {R"({"optimizer": "rmsprop"})", "\"optimizer\""},
      {R"({"learning_rate": 0})", "\"learning_rate\""},
      {R"({"dim": 2, "true_w": [1]})", "\"true_w\""},
      {R"({"shard_policy": "rows"})", "\"shard_policy\""},
      {R"({"shuffle": 1})", "\"shuffle\""},
      {R"({"hang_at_step": -2})", "\"hang_at_step\""},
      {R"({"step_sleep_until_file": 3})", "\"step_sleep_until_file\""},
      {R"({"learning_rte": 0.1})",
       "config field \"learning_rte\" is not one this example reads"},
      {R"([1, 2])", "JSON object"},
      {R"({"dim": )", "JSON object"},
  };
  for (const auto& [config, field] : cases) {
    FakeJobOptions job = Job(1, config);
    job.steps = 1;
    absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << config;
    EXPECT_THAT(result.status().message(), HasSubstr(field)) << config;
  }
}

TEST(LinearRegressionTest, StepWithoutInitSaysWhatToDo) {
  FakeJobOptions job = Job(1, "{}");
  job.init_fn.clear();
  absl::StatusOr<FakeJobResult> result = RunFakeJob(Library(), job);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("--init=linear_init"));
}

}  // namespace
}  // namespace cohort::examples
