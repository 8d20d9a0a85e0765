#include "worker_agent/ps_replica_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

// An in-memory ps: applies SGD pushes to trained variables, keeps the last
// value pushed to aggregated ones.
class FakeServer final : public VariableClient {
 public:
  absl::Status Create(const std::vector<ServerVariable>& variables) override {
    for (const ServerVariable& v : variables) {
      if (values.count(v.options.name) == 0) {
        values[v.options.name] = v.initial;
        lr[v.options.name] = v.trained ? v.optimizer.learning_rate : 0;
        trained[v.options.name] = v.trained;
      }
    }
    return absl::OkStatus();
  }
  absl::Status Pull(const std::vector<HostSlice>& slices) override {
    ++pulls;
    for (const HostSlice& s : slices) {
      auto it = values.find(s.name);
      if (it == values.end()) return absl::NotFoundError(s.name);
      std::memcpy(s.data, it->second.data(), s.bytes);
    }
    return absl::OkStatus();
  }
  absl::Status Push(const std::vector<HostSlice>& slices) override {
    ++pushes;
    for (const HostSlice& s : slices) {
      std::vector<char>& value = values.at(s.name);
      if (!trained[s.name]) {
        std::memcpy(value.data(), s.data, s.bytes);
        continue;
      }
      auto* w = reinterpret_cast<float*>(value.data());
      const auto* g = static_cast<const float*>(s.data);
      for (size_t i = 0; i < s.bytes / 4; ++i) {
        w[i] -= static_cast<float>(lr[s.name]) * g[i];
      }
    }
    return absl::OkStatus();
  }

  std::map<std::string, std::vector<char>> values;
  std::map<std::string, double> lr;
  std::map<std::string, bool> trained;
  int pulls = 0;
  int pushes = 0;
};

class PsReplicaContextTest : public ::testing::Test {
 protected:
  JobInfo job_{.steps = 10, .global_batch_size = 4, .seed = 1};
  FakeServer server_;
  PsReplicaContext context_{&job_, Device{}, &server_};
};

TEST_F(PsReplicaContextTest, VariablesHoldNoSixteenBitFloats) {
  absl::StatusOr<Variable*> half = context_.create_variable(
      {.name = "h", .shape = {2}, .dtype = DType::kFloat16}, nullptr);
  EXPECT_EQ(half.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(half.status().message()),
              ::testing::HasSubstr("\"h\": a variable cannot hold float16"));
}

TEST_F(PsReplicaContextTest, ClosuresPullThenPushGradientsToTheServer) {
  const float initial[2] = {1.0f, 2.0f};
  Variable* w = *context_.create_variable({.name = "w", .shape = {2}}, initial);
  Optimizer* sgd = *context_.create_optimizer(
      {.kind = OptimizerKind::kSgd, .learning_rate = 0.5}, {w});
  ASSERT_TRUE(context_.DeclareVariables().ok());
  EXPECT_TRUE(server_.trained["w"]);

  // Another worker moved w meanwhile: the closure starts from its value.
  reinterpret_cast<float*>(server_.values["w"].data())[0] = 3.0f;
  ASSERT_TRUE(context_.BeginClosure(7).ok());
  EXPECT_EQ(context_.step(), 7);
  EXPECT_EQ(w->data<float>()[0], 3.0f);
  float gradient[2] = {2.0f, 4.0f};
  const Tensor g{gradient, 2, DType::kFloat32};
  ASSERT_TRUE(sgd->apply_gradients({&g, 1}).ok());
  context_.report("loss", 0.25);
  context_.stop_training("the loss is low enough");
  absl::StatusOr<v1::ClosureResult> result = context_.EndClosure();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->closure(), 7);
  EXPECT_EQ(result->values().at("loss"), 0.25);
  EXPECT_EQ(result->stop_reason(),
            "closure 7 called stop_training: the loss is low enough");
  const auto* stored = reinterpret_cast<float*>(server_.values["w"].data());
  EXPECT_EQ(stored[0], 2.0f);  // 3 - 0.5 * 2
  EXPECT_EQ(stored[1], 0.0f);  // 2 - 0.5 * 4
}

TEST_F(PsReplicaContextTest, CollectivesAreIdentitiesOverOneReplica) {
  EXPECT_EQ(context_.num_replicas_in_sync(), 1);
  double loss = 1.5;
  ASSERT_TRUE(
      context_.all_reduce(ReduceOp::kMean, {&loss, 1, DType::kFloat64}).ok());
  EXPECT_EQ(loss, 1.5);
  EXPECT_FALSE(context_.broadcast({&loss, 1, DType::kFloat64}, 1).ok());
  bool ran = false;
  ASSERT_TRUE(context_
                  .merge_call(
                      [&](const PerReplica& values) {
                        ran = values.values.size() == 1 &&
                              *values.as<double>(0, 0) == 1.5;
                        return absl::OkStatus();
                      },
                      std::vector<Tensor>{{&loss, 1, DType::kFloat64}})
                  .ok());
  EXPECT_TRUE(ran);
}

TEST_F(PsReplicaContextTest, OnReadVariablesArePushedAfterEachClosure) {
  Variable* count =
      *context_.create_variable({.name = "count",
                                 .shape = {1},
                                 .sync = VariableSync::kOnRead,
                                 .aggregation = Aggregation::kSum},
                                nullptr);
  ASSERT_TRUE(context_.DeclareVariables().ok());
  ASSERT_TRUE(context_.BeginClosure(0).ok());
  count->data<float>()[0] = 5.0f;
  ASSERT_TRUE(context_.EndClosure().ok());
  EXPECT_EQ(reinterpret_cast<float*>(server_.values["count"].data())[0], 5.0f);
}

TEST_F(PsReplicaContextTest, MomentumAndMismatchedGradientsAreRefused) {
  Variable* w = *context_.create_variable({.name = "w", .shape = {2}}, nullptr);
  EXPECT_THAT(context_.create_optimizer({.kind = OptimizerKind::kMomentum}, {w})
                  .status()
                  .message(),
              HasSubstr("momentum is not available under ParameterServer"));
  Optimizer* sgd = *context_.create_optimizer({}, {w});
  float gradient[3] = {};
  const Tensor g{gradient, 3, DType::kFloat32};
  EXPECT_THAT(sgd->apply_gradients({&g, 1}).message(),
              HasSubstr("\"w\" has 2"));
}

}  // namespace
}  // namespace cohort::agent
