#include "common/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace cohort {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricRegistryTest, CountersAndGaugesRenderWithHelpTypeAndLabels) {
  MetricRegistry registry;
  registry.DeclareCounter("cohort_things_total", "Things done.");
  registry.DeclareGauge("cohort_level", "A level.");
  registry.Increment("cohort_things_total", {{"kind", "a"}});
  registry.Increment("cohort_things_total", {{"kind", "a"}}, 2);
  registry.Set("cohort_level", {}, 0.5);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# HELP cohort_level A level.\n"
                              "# TYPE cohort_level gauge\n"
                              "cohort_level 0.5\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE cohort_things_total counter\n"
                              "cohort_things_total{kind=\"a\"} 3\n"));
}

TEST(MetricRegistryTest, GaugesMoveUpAndDownByAdd) {
  MetricRegistry registry;
  registry.DeclareGauge("cohort_open", "Open things.");
  registry.Add("cohort_open", {{"m", "x"}}, 1);
  registry.Add("cohort_open", {{"m", "x"}}, 1);
  registry.Add("cohort_open", {{"m", "x"}}, -1);
  EXPECT_THAT(registry.Render(), HasSubstr("cohort_open{m=\"x\"} 1\n"));
}

TEST(MetricRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricRegistry registry;
  registry.DeclareHistogram("cohort_wait_seconds", "Waits.", {0.1, 1});
  for (double v : {0.05, 0.5, 0.7, 5.0}) {
    registry.Observe("cohort_wait_seconds", {{"op", "x"}}, v);
  }
  const std::string text = registry.Render();
  EXPECT_THAT(text,
              HasSubstr("cohort_wait_seconds_bucket{op=\"x\",le=\"0.1\"} 1\n"
                        "cohort_wait_seconds_bucket{op=\"x\",le=\"1\"} 3\n"
                        "cohort_wait_seconds_bucket{op=\"x\",le=\"+Inf\"} 4\n"
                        "cohort_wait_seconds_sum{op=\"x\"} 6.25\n"
                        "cohort_wait_seconds_count{op=\"x\"} 4\n"));
}

TEST(MetricRegistryTest, LabelValuesAreEscaped) {
  MetricRegistry registry;
  registry.DeclareGauge("cohort_g", "G.");
  registry.Set("cohort_g", {{"name", "a\"b\\c\nd"}}, 1);
  EXPECT_THAT(registry.Render(),
              HasSubstr("cohort_g{name=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(MetricRegistryTest, CollectorsRunAtEachRenderUntilRemoved) {
  MetricRegistry registry;
  int runs = 0;
  {
    ScopedCollector collector(&registry, [&](MetricWriter& w) {
      ++runs;
      w.Gauge("cohort_runs", "Runs.", {{"task", "worker:0"}}, runs);
    });
    EXPECT_THAT(registry.Render(),
                HasSubstr("cohort_runs{task=\"worker:0\"} 1\n"));
    EXPECT_THAT(registry.Render(),
                HasSubstr("cohort_runs{task=\"worker:0\"} 2\n"));
  }
  EXPECT_THAT(registry.Render(), Not(HasSubstr("cohort_runs")));
  EXPECT_EQ(runs, 2);
}

TEST(MetricRegistryTest, FamiliesWithoutSeriesAreLeftOut) {
  MetricRegistry registry;
  registry.DeclareCounter("cohort_unused_total", "Never recorded.");
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricRegistryTest, LatencyBucketsSpanMicrosecondsToMinutes) {
  const std::vector<double> b = LatencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-6);
  EXPECT_NEAR(b.back(), 100, 1e-9);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

}  // namespace
}  // namespace cohort
