#include "worker_agent/early_stopping.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

v1::EarlyStopping Rule(const std::string& metric) {
  v1::EarlyStopping rule;
  rule.set_metric(metric);
  return rule;
}

// Feeds `values` as steps 1, 2, ...; the steps done when it said stop, or -1.
int64_t StopsAfter(EarlyStoppingRule& rule, const std::vector<double>& values,
                   std::string* reason = nullptr) {
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t done = static_cast<int64_t>(i) + 1;
    std::optional<std::string> verdict = rule.Observe(done, {{"m", values[i]}});
    if (verdict.has_value()) {
      if (reason != nullptr) *reason = *verdict;
      return done;
    }
  }
  return -1;
}

TEST(EarlyStoppingRuleTest, WithoutAMetricItNeverStops) {
  EarlyStoppingRule rule({});
  EXPECT_FALSE(rule.enabled());
  EXPECT_EQ(rule.Observe(1, {}), std::nullopt);
}

TEST(EarlyStoppingRuleTest, TargetStopsWhenReachedInEitherDirection) {
  v1::EarlyStopping loss = Rule("m");
  loss.set_target(0.5);
  EarlyStoppingRule lower(loss);
  std::string reason;
  EXPECT_EQ(StopsAfter(lower, {0.9, 0.7, 0.5, 0.4}, &reason), 3);
  EXPECT_EQ(reason, "early_stopping: m 0.5 reached the target 0.5 at step 3");

  v1::EarlyStopping accuracy = Rule("m");
  accuracy.set_maximize(true);
  accuracy.set_target(0.9);
  EarlyStoppingRule higher(accuracy);
  EXPECT_EQ(StopsAfter(higher, {0.5, 0.95, 0.97}), 2);
}

TEST(EarlyStoppingRuleTest,
     PatienceCountsStepsWithoutAnImprovementBeyondMinDelta) {
  v1::EarlyStopping spec = Rule("m");
  spec.set_patience(2);
  spec.set_min_delta(0.05);
  EarlyStoppingRule rule(spec);
  std::string reason;
  // 0.98 and 0.96 improve on 1.0 by less than min_delta: no improvement.
  EXPECT_EQ(StopsAfter(rule, {1.0, 0.8, 0.78, 0.77, 0.5}, &reason), 4);
  EXPECT_THAT(reason, HasSubstr("did not improve by more than 0.05 for 2 "
                                "steps (best 0.8 at step 2)"));

  EarlyStoppingRule improving(spec);
  EXPECT_EQ(StopsAfter(improving, {1.0, 0.9, 0.8, 0.7, 0.6}), -1);
}

TEST(EarlyStoppingRuleTest, StepsWithoutTheMetricAreNotJudgedAndWarnOnce) {
  v1::EarlyStopping spec = Rule("accuracy");
  spec.set_maximize(true);
  spec.set_target(0.9);
  EarlyStoppingRule rule(spec);
  EXPECT_EQ(rule.Observe(1, {{"loss", 1.0}}), std::nullopt);
  std::optional<std::string> warning = rule.TakeWarning();
  ASSERT_TRUE(warning.has_value());
  EXPECT_THAT(*warning, HasSubstr("watches \"accuracy\", but step 0 reported "
                                  "only \"loss\" reduced"));
  EXPECT_EQ(rule.Observe(2, {{"loss", 0.9}}), std::nullopt);
  EXPECT_EQ(rule.TakeWarning(), std::nullopt);  // once
  // An evaluation step reports it; the steps between are not judged.
  EXPECT_EQ(rule.Observe(3, {{"loss", 0.8}, {"accuracy", 0.7}}), std::nullopt);
  EXPECT_EQ(rule.Observe(4, {{"loss", 0.7}}), std::nullopt);
  EXPECT_THAT(rule.Observe(5, {{"loss", 0.6}, {"accuracy", 0.93}}),
              ::testing::Optional(HasSubstr("reached the target 0.9")));
}

TEST(EarlyStoppingRuleTest, StepsThatReportNoMetricAtAllWarnOnceAfterAWhile) {
  // A resumed attempt's first step is 601: it counts the steps it saw.
  EarlyStoppingRule rule(Rule("val_loss"));
  const int64_t quiet = EarlyStoppingRule::kQuietSteps;
  for (int64_t done = 601; done < 600 + quiet; ++done) {
    EXPECT_EQ(rule.Observe(done, {}), std::nullopt);
    ASSERT_EQ(rule.TakeWarning(), std::nullopt) << "after step " << done;
  }
  EXPECT_EQ(rule.Observe(600 + quiet, {}), std::nullopt);
  EXPECT_THAT(rule.TakeWarning(),
              ::testing::Optional(HasSubstr(
                  "watches \"val_loss\", but none of the 100 steps since "
                  "step 600 reported any metric")));
  EXPECT_EQ(rule.Observe(601 + quiet, {}), std::nullopt);
  EXPECT_EQ(rule.TakeWarning(), std::nullopt);  // once
}

}  // namespace
}  // namespace cohort::agent
