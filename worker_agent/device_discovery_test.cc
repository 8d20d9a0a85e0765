#include "worker_agent/device_discovery.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker_agent/cuda_probe.h"

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

TEST(DeviceDiscoveryTest, WithoutAGpuOffersTheRequestedCpuDevices) {
  if (!ProbeCuda().devices.empty()) GTEST_SKIP() << "a CUDA device is present";
  const DiscoveredDevices found = DiscoverDevices(3);
  ASSERT_EQ(found.devices.size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(found.devices[i].kind(), v1::Device::CPU);
    EXPECT_EQ(found.devices[i].index(), i);
    EXPECT_EQ(found.devices[i].name(), "cpu:" + std::to_string(i));
  }
  // The log says why there are no GPUs.
  EXPECT_THAT(found.note, HasSubstr("3 CPU device(s) ("));
}

TEST(DeviceDiscoveryTest, GpusAreReportedThroughTheCudaRuntime) {
  const CudaProbe probe = ProbeCuda();
  if (probe.devices.empty()) GTEST_SKIP() << "no CUDA device: " << probe.note;
  const DiscoveredDevices found = DiscoverDevices(1);
  ASSERT_EQ(found.devices.size(), probe.devices.size());
  for (const v1::Device& device : found.devices) {
    EXPECT_EQ(device.kind(), v1::Device::CUDA);
    EXPECT_GT(device.memory_bytes(), 0);
    EXPECT_FALSE(device.name().empty());
  }
}

TEST(DeviceDiscoveryTest, BuildFeaturesMatchTheBuild) {
  const std::vector<std::string> features = BuildFeatures();
#ifdef COHORT_HAVE_CUDA
  EXPECT_THAT(features, ::testing::Contains(HasSubstr("cuda ")));
#else
  EXPECT_THAT(features,
              ::testing::Not(::testing::Contains(HasSubstr("cuda "))));
#endif
#ifdef COHORT_HAVE_NCCL
  EXPECT_THAT(features, ::testing::Contains(HasSubstr("nccl 2.")));
#endif
}

}  // namespace
}  // namespace cohort::agent
