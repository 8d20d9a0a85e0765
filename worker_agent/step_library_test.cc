#include "worker_agent/step_library.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

// A shared library that is no step library is refused and unmapped: an
// agent that is sent many such files does not keep them all loaded.
TEST(StepLibraryTest, AnotherSharedLibraryIsRefusedAndUnloaded) {
  const absl::StatusOr<const internal::Registry*> opened =
      OpenStepLibrary(COHORT_TEST_PLAIN_LIBRARY, "plain.so");
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(opened.status().message(),
              HasSubstr("plain.so is a shared library but not a Cohort step "
                        "library"));
  EXPECT_EQ(dlopen(COHORT_TEST_PLAIN_LIBRARY, RTLD_NOW | RTLD_NOLOAD), nullptr);
}

}  // namespace
}  // namespace cohort::agent
