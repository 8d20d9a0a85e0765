#include "common/cluster_resolver.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::HasSubstr;

constexpr char kTfConfig[] = R"({"cluster": {"chief": ["c:1"],
    "worker": ["w0:1", "w1:1"]}, "task": {"type": "worker", "index": 1}})";

TEST(ClusterResolverTest, ReadsTaskFromTfConfig) {
  setenv("TF_CONFIG", kTfConfig, 1);
  absl::StatusOr<ClusterResolver> resolver = ClusterResolver::FromTfConfig();
  unsetenv("TF_CONFIG");
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  EXPECT_EQ(*resolver->task(), (TaskId{"worker", 1}));
  EXPECT_EQ(*resolver->task_address(), "w1:1");
  EXPECT_EQ(resolver->cluster_spec().num_tasks("worker"), 2);
}

TEST(ClusterResolverTest, UnsetTfConfigIsNotFound) {
  unsetenv("TF_CONFIG");
  EXPECT_EQ(ClusterResolver::FromTfConfig().status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ClusterResolverTest, TaskMayBeSetButMustBeInTheCluster) {
  ClusterResolver resolver(
      *ClusterSpec::FromJson(R"({"cluster": {"worker": ["w0:1"]}})"));
  EXPECT_EQ(resolver.task().status().code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status refused = resolver.SetTask({"worker", 3});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("worker:3 is not in the cluster spec"));
  ASSERT_TRUE(resolver.SetTask({"worker", 0}).ok());
  EXPECT_EQ(*resolver.task_address(), "w0:1");
}

}  // namespace
}  // namespace cohort
