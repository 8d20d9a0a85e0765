// Linked into every test binary (cohort_test_support). GoogleTest reports
// the tests of a suite whose SetUpTestSuite failed as SKIPPED, and CTest
// counts any test that prints "[  SKIPPED ]" as skipped, whatever its exit
// code: a suite that could not set up (a cluster that never became ready)
// would pass unnoticed. This listener ends the binary with a failure as
// such a test starts, before anything prints it as skipped.

#include <cstdio>
#include <cstdlib>

#include "gtest/gtest.h"

namespace cohort::testing {
namespace {

class FailedSuiteSetUpFails final : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& test) override {
    const ::testing::TestSuite* suite =
        ::testing::UnitTest::GetInstance()->current_test_suite();
    if (suite == nullptr || !suite->ad_hoc_test_result().Failed()) return;
    std::fprintf(stderr,
                 "[  FAILED  ] %s.%s: its suite's SetUpTestSuite failed (see "
                 "above), so it cannot run\n",
                 test.test_suite_name(), test.name());
    std::fflush(nullptr);
    std::_Exit(1);
  }
};

// Before main: the listener is in place however the binary's main starts
// GoogleTest.
const bool kInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new FailedSuiteSetUpFails);  // owned by the listener list
  return true;
}();

}  // namespace
}  // namespace cohort::testing
