#include "ps_server/ps_optimizers.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps_server/ps_test_util.h"

namespace cohort::ps {
namespace {

using ::cohort::ps::test_util::Bytes;
using ::cohort::ps::test_util::Values;

using ::testing::HasSubstr;

v1::PsOptimizer Optimizer(v1::PsOptimizer::Kind kind, double lr) {
  v1::PsOptimizer optimizer;
  optimizer.set_kind(kind);
  optimizer.set_learning_rate(lr);
  return WithDefaults(optimizer);
}

// One variable with its optimizer state, as the store keeps it.
template <typename T>
struct Variable {
  Variable(const v1::PsOptimizer& optimizer, v1::PsDType dtype,
           const std::vector<T>& initial)
      : optimizer(optimizer),
        dtype(dtype),
        value(Bytes(initial)),
        slots(InitialSlots(optimizer, dtype, initial.size())) {}

  void Push(const std::vector<T>& gradient) {
    ApplyUpdate(optimizer, dtype, Bytes(gradient),
                {.value = &value, .slots = &slots, .step = &step});
  }
  std::vector<T> get() const { return Values<T>(value); }

  v1::PsOptimizer optimizer;
  v1::PsDType dtype;
  std::string value;
  std::vector<std::string> slots;
  int64_t step = 0;
};

TEST(PsOptimizersTest, SgdSubtractsTheScaledGradient) {
  Variable<float> w(Optimizer(v1::PsOptimizer::SGD, 0.1), v1::PS_FLOAT32,
                    {1.0f, 2.0f, -3.0f});
  w.Push({0.5f, -1.0f, 10.0f});
  // 1 - 0.1*0.5 = 0.95; 2 + 0.1 = 2.1; -3 - 1 = -4.
  EXPECT_THAT(w.get(), ::testing::ElementsAre(::testing::FloatEq(0.95f),
                                              ::testing::FloatEq(2.1f),
                                              ::testing::FloatEq(-4.0f)));
  EXPECT_EQ(w.step, 1);
}

TEST(PsOptimizersTest, AdagradAccumulatesSquaresFromTheInitialValue) {
  Variable<double> w(Optimizer(v1::PsOptimizer::ADAGRAD, 0.5), v1::PS_FLOAT64,
                     {1.0, 1.0});
  // The default accumulator starts at 0.1.
  EXPECT_THAT(Values<double>(w.slots[0]), ::testing::ElementsAre(0.1, 0.1));
  w.Push({1.0, 2.0});
  // acc = 0.1 + 1 = 1.1; w = 1 - 0.5 * 1 / (sqrt(1.1) + 1e-7)
  // acc = 0.1 + 4 = 4.1; w = 1 - 0.5 * 2 / (sqrt(4.1) + 1e-7)
  const double w0 = 1.0 - 0.5 * 1.0 / (std::sqrt(1.1) + 1e-7);
  const double w1 = 1.0 - 0.5 * 2.0 / (std::sqrt(4.1) + 1e-7);
  EXPECT_NEAR(w.get()[0], 0.523268, 1e-6);
  EXPECT_DOUBLE_EQ(w.get()[0], w0);
  EXPECT_DOUBLE_EQ(w.get()[1], w1);
  EXPECT_THAT(Values<double>(w.slots[0]), ::testing::ElementsAre(1.1, 4.1));
  // A second push uses the grown accumulator: 1.1 + 1 = 2.1.
  w.Push({1.0, 0.0});
  EXPECT_DOUBLE_EQ(w.get()[0], w0 - 0.5 / (std::sqrt(2.1) + 1e-7));
  EXPECT_DOUBLE_EQ(w.get()[1], w1);
}

TEST(PsOptimizersTest, AdamFollowsTensorFlowsBiasCorrection) {
  v1::PsOptimizer adam = Optimizer(v1::PsOptimizer::ADAM, 0.001);
  EXPECT_DOUBLE_EQ(adam.beta1(), 0.9);
  EXPECT_DOUBLE_EQ(adam.beta2(), 0.999);
  EXPECT_DOUBLE_EQ(adam.epsilon(), 1e-7);
  Variable<double> w(adam, v1::PS_FLOAT64, {0.5});
  w.Push({2.0});
  // t=1: m = 0.2, v = 0.004, lr_t = 0.001*sqrt(0.001)/0.1 = 3.16228e-4,
  // w = 0.5 - lr_t * 0.2 / (sqrt(0.004) + 1e-7) = 0.5 - 0.001 (almost).
  const double lr1 = 0.001 * std::sqrt(1 - 0.999) / (1 - 0.9);
  const double w1 = 0.5 - lr1 * 0.2 / (std::sqrt(0.004) + 1e-7);
  EXPECT_NEAR(w.get()[0], 0.499, 1e-6);
  EXPECT_DOUBLE_EQ(w.get()[0], w1);
  EXPECT_DOUBLE_EQ(Values<double>(w.slots[0])[0], 0.2);
  EXPECT_DOUBLE_EQ(Values<double>(w.slots[1])[0], 0.004);
  w.Push({-1.0});
  // t=2: m = 0.18 - 0.1 = 0.08, v = 0.003996 + 0.001 = 0.004996.
  const double m2 = 0.9 * 0.2 + 0.1 * -1.0;
  const double v2 = 0.999 * 0.004 + 0.001 * 1.0;
  const double lr2 = 0.001 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
  EXPECT_DOUBLE_EQ(w.get()[0], w1 - lr2 * m2 / (std::sqrt(v2) + 1e-7));
  EXPECT_EQ(w.step, 2);
}

TEST(PsOptimizersTest, Float32IsComputedInFloat32) {
  Variable<float> w(Optimizer(v1::PsOptimizer::ADAM, 0.01), v1::PS_FLOAT32,
                    {1.0f});
  w.Push({1.0f});
  // Adam's first step moves by about lr whatever the gradient's size.
  EXPECT_NEAR(w.get()[0], 0.99f, 1e-5);
}

TEST(PsOptimizersTest, NoOptimizerAssigns) {
  Variable<int64_t> w(v1::PsOptimizer(), v1::PS_INT64, {1, 2});
  EXPECT_TRUE(w.slots.empty());
  w.Push({7, -8});
  EXPECT_THAT(w.get(), ::testing::ElementsAre(7, -8));
}

TEST(PsOptimizersTest, SlotsPerKind) {
  EXPECT_EQ(NumSlots(v1::PsOptimizer::KIND_UNSPECIFIED), 0);
  EXPECT_EQ(NumSlots(v1::PsOptimizer::SGD), 0);
  EXPECT_EQ(NumSlots(v1::PsOptimizer::ADAGRAD), 1);
  EXPECT_EQ(NumSlots(v1::PsOptimizer::ADAM), 2);
  v1::PsOptimizer adagrad = Optimizer(v1::PsOptimizer::ADAGRAD, 1);
  adagrad.set_initial_accumulator_value(0.25);
  EXPECT_THAT(Values<float>(InitialSlots(adagrad, v1::PS_FLOAT32, 2)[0]),
              ::testing::ElementsAre(0.25f, 0.25f));
}

TEST(PsOptimizersTest, ValidationNamesTheVariableAndTheProblem) {
  EXPECT_TRUE(ValidateOptimizer(Optimizer(v1::PsOptimizer::SGD, 0.1),
                                v1::PS_FLOAT32, "w")
                  .ok());
  EXPECT_TRUE(ValidateOptimizer(v1::PsOptimizer(), v1::PS_INT32, "w").ok());

  absl::Status status = ValidateOptimizer(Optimizer(v1::PsOptimizer::SGD, 0),
                                          v1::PS_FLOAT32, "dense/kernel");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("dense/kernel"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("learning_rate"));

  status = ValidateOptimizer(Optimizer(v1::PsOptimizer::SGD, NAN),
                             v1::PS_FLOAT32, "w");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);

  status = ValidateOptimizer(Optimizer(v1::PsOptimizer::ADAM, 0.1),
                             v1::PS_INT64, "steps");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("int64"));

  v1::PsOptimizer adam = Optimizer(v1::PsOptimizer::ADAM, 0.1);
  adam.set_beta2(1.0);
  status = ValidateOptimizer(adam, v1::PS_FLOAT32, "w");
  EXPECT_THAT(std::string(status.message()), HasSubstr("betas"));

  // In range as doubles, out of it in the variable's float32.
  adam.set_beta2(0.99999999);
  status = ValidateOptimizer(adam, v1::PS_FLOAT32, "w");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("Adam's betas must be in [0, 1), got 0.99999999 (1 in "
                        "float32)"));
  EXPECT_TRUE(ValidateOptimizer(adam, v1::PS_FLOAT64, "w").ok());
  adam.set_beta2(0.999);
  adam.set_epsilon(1e-46);
  status = ValidateOptimizer(adam, v1::PS_FLOAT32, "w");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("epsilon must be positive, got 1e-46 (0 in float32)"));
  status = ValidateOptimizer(Optimizer(v1::PsOptimizer::SGD, 1e300),
                             v1::PS_FLOAT32, "w");
  EXPECT_THAT(
      std::string(status.message()),
      HasSubstr("learning_rate must be positive and finite, got 1e+300 (inf in "
                "float32)"));

  v1::PsOptimizer adagrad = Optimizer(v1::PsOptimizer::ADAGRAD, 0.1);
  adagrad.set_initial_accumulator_value(-1);
  status = ValidateOptimizer(adagrad, v1::PS_FLOAT32, "w");
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("initial_accumulator_value"));
}

}  // namespace
}  // namespace cohort::ps
