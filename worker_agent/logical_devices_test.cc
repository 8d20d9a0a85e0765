#include "worker_agent/logical_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"
#include "worker_agent/replica_context.h"

namespace cohort::agent {
namespace {

using ::testing::HasSubstr;

std::vector<Device> Cpus(int n) {
  std::vector<Device> devices;
  for (int i = 0; i < n; ++i) devices.push_back({Device::Kind::kCpu, i});
  return devices;
}

TEST(LogicalDevicesTest, AnIdOutOfRangeNamesTheIdAndTheCount) {
  LogicalDevices devices(Cpus(2));
  EXPECT_EQ(devices.Get(1)->index, 1);
  for (int bad : {2, -1}) {
    absl::StatusOr<Device> device = devices.Get(bad);
    EXPECT_EQ(device.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(device.status().message(),
                HasSubstr(absl::StrCat("logical device ", bad)));
    EXPECT_THAT(device.status().message(), HasSubstr("has 2 logical devices"));
  }
  EXPECT_EQ(
      devices.RunOn(2, [](const Device&) { return absl::OkStatus(); }).code(),
      absl::StatusCode::kOutOfRange);
  EXPECT_EQ(devices.Allocate(7, 4, DType::kFloat32).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(LogicalDevicesTest, WorkRunsOnItsDevicesOwnThreadAndReturnsItsStatus) {
  LogicalDevices devices(Cpus(3));
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id on_zero, on_one, on_two, on_one_again;
  ASSERT_TRUE(devices
                  .RunOn(0,
                         [&](const Device& d) {
                           EXPECT_EQ(d.index, 0);
                           on_zero = std::this_thread::get_id();
                           return absl::OkStatus();
                         })
                  .ok());
  ASSERT_TRUE(devices
                  .RunOn(1,
                         [&](const Device& d) {
                           EXPECT_EQ(d.index, 1);
                           on_one = std::this_thread::get_id();
                           return absl::OkStatus();
                         })
                  .ok());
  ASSERT_TRUE(devices
                  .RunOn(2,
                         [&](const Device&) {
                           on_two = std::this_thread::get_id();
                           return absl::OkStatus();
                         })
                  .ok());
  absl::Status failed = devices.RunOn(1, [&](const Device&) {
    on_one_again = std::this_thread::get_id();
    return absl::InternalError("layer 2 broke");
  });
  EXPECT_EQ(on_zero, caller);  // device 0 is the replica's own thread
  EXPECT_NE(on_one, caller);
  EXPECT_NE(on_two, caller);
  EXPECT_NE(on_one, on_two);
  EXPECT_EQ(on_one_again, on_one);  // one executor per device
  EXPECT_EQ(failed, absl::InternalError("layer 2 broke"));
}

TEST(LogicalDevicesTest, AllocatedTensorsAreZeroedAndStay) {
  LogicalDevices devices(Cpus(2));
  absl::StatusOr<Tensor> a = devices.Allocate(1, 5, DType::kFloat64);
  absl::StatusOr<Tensor> b = devices.Allocate(1, 3, DType::kInt32);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->count; ++i) EXPECT_EQ(a->as<double>()[i], 0.0);
  a->as<double>()[4] = 2.5;
  EXPECT_EQ(b->as<int32_t>()[2], 0);
  EXPECT_EQ(a->as<double>()[4], 2.5);
}

TEST(LogicalDevicesTest, AReplicaPlacesVariablesOnItsLogicalDevices) {
  JobInfo job;
  job.collective_timeout = absl::Seconds(10);
  collective::LocalHub hub(1);
  collective::AlgorithmicCommunicator comm(hub.Connect(0),
                                           {.timeout = absl::Seconds(10)});
  ReplicaContextImpl ctx(&job, 0, 0, Cpus(2)[0], &comm, nullptr, Cpus(2));
  EXPECT_EQ(ctx.num_logical_devices(), 2);
  const float one[2] = {1, 1};
  absl::StatusOr<Variable*> w = ctx.create_variable(
      {.name = "w", .shape = {2}, .logical_device = 1}, one);
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<Variable*> bad = ctx.create_variable(
      {.name = "v", .shape = {2}, .logical_device = 2}, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(bad.status().message(), HasSubstr("create_variable \"v\""));
  EXPECT_THAT(bad.status().message(), HasSubstr("logical device 2"));

  // The optimizer updates it where it lives.
  absl::StatusOr<Optimizer*> sgd =
      ctx.create_optimizer({.learning_rate = 0.5}, {*w});
  ASSERT_TRUE(sgd.ok()) << sgd.status();
  float gradient[2] = {1, 2};
  ASSERT_TRUE((*sgd)->apply_gradients({{{gradient, 2, DType::kFloat32}}}).ok());
  EXPECT_EQ((*w)->data<float>()[0], 0.5f);
  EXPECT_EQ((*w)->data<float>()[1], 0.0f);
}

}  // namespace
}  // namespace cohort::agent
