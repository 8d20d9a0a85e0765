#include "rpc/reportable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cohort/v1/job.pb.h"
#include "common/names.h"

namespace cohort::rpc {
namespace {

using ::testing::HasSubstr;

TEST(ReportableTest, MalformedOrHugeTextIsRepairedSoTheReportParses) {
  v1::AgentJobReport report;
  report.set_job_id("7");
  report.set_error("step failed: bad byte \xff in input");
  (*report.mutable_metrics())["acc\xc3"] = 0.5;
  (*report.mutable_metrics())["loss"] = 0.25;
  report.set_stop_reason(std::string(kMaxReportedTextBytes + 10, 'x'));
  report.add_evaluations()->set_error("eval \xed\xa0\x80 failed");

  // As it is, the receiving side refuses it whole.
  std::string wire;
  ASSERT_TRUE(report.SerializeToString(&wire));
  v1::AgentJobReport parsed;
  EXPECT_FALSE(parsed.ParseFromString(wire));

  ASSERT_TRUE(HasUnreportableText(report));
  EXPECT_EQ(MakeReportable(report), 4);
  EXPECT_FALSE(HasUnreportableText(report));
  ASSERT_TRUE(report.SerializeToString(&wire));
  ASSERT_TRUE(parsed.ParseFromString(wire));

  EXPECT_EQ(parsed.job_id(), "7");
  EXPECT_EQ(parsed.error(), "step failed: bad byte \xef\xbf\xbd in input");
  EXPECT_EQ(parsed.metrics().at("acc\xef\xbf\xbd"), 0.5);
  EXPECT_EQ(parsed.metrics().at("loss"), 0.25);
  EXPECT_LE(parsed.stop_reason().size(), kMaxReportedTextBytes);
  EXPECT_THAT(parsed.stop_reason(), HasSubstr("[50 more bytes cut]"));
  EXPECT_EQ(parsed.evaluations(0).error(),
            "eval \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd failed");
}

TEST(ReportableTest, AWellFormedReportIsSentAsItIsWithoutACopy) {
  v1::AgentJobReport report;
  report.set_error("gewicht/\xc3\xa4 is NaN");
  (*report.mutable_metrics())["accuracy"] = 0.9;
  v1::AgentJobReport storage;
  EXPECT_EQ(&Reportable(report, storage), &report);

  report.set_error("\xff");
  const v1::AgentJobReport& sent = Reportable(report, storage);
  EXPECT_EQ(&sent, &storage);
  EXPECT_EQ(sent.error(), "\xef\xbf\xbd");
  EXPECT_EQ(sent.metrics().at("accuracy"), 0.9);
}

TEST(ReportableTest, TextIsCutOnACharacterBoundaryWithinTheLimit) {
  std::string umlauts;
  for (int i = 0; i < 50; ++i) umlauts += "\xc3\xa4";  // 100 bytes
  // 61 bytes: 40 for the note leave 21, so 10 whole characters.
  std::string cut;
  for (int i = 0; i < 10; ++i) cut += "\xc3\xa4";
  EXPECT_EQ(ToReportableText(umlauts, 61), cut + " [80 more bytes cut]");
  EXPECT_EQ(ToReportableText(umlauts, 100), umlauts);
  EXPECT_LE(ToReportableText(std::string(1000, 'x'), 50).size(), 50u);
  EXPECT_TRUE(IsValidUtf8(ToReportableText("a\xc3", 100)));
}

}  // namespace
}  // namespace cohort::rpc
