#include "optimizer/optimizer_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#ifdef COHORT_HAVE_CUDA
#include "worker_agent/cuda_probe.h"
#include "worker_agent/device_memory.h"
#endif

namespace cohort::agent {
namespace {

using optimizer::ApplyUpdateHost;
using optimizer::SlotCount;
using optimizer::SlotName;
#ifdef COHORT_HAVE_CUDA
using optimizer::ApplyUpdateCuda;
#endif

template <typename T>
struct Typed {
  static constexpr DType kDType =
      sizeof(T) == 4 ? DType::kFloat32 : DType::kFloat64;
};

template <typename T>
class OptimizerKernelsTest : public testing::Test {};
using FloatTypes = testing::Types<float, double>;
TYPED_TEST_SUITE(OptimizerKernelsTest, FloatTypes);

// Against the formulas evaluated by hand: a relative 1e-12 in double, and
// 1e-4 in float, whose coefficients themselves round (1 - 0.999f is off by
// about 1e-5 relative).
template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  const double relative = sizeof(T) == 4 ? 1e-4 : 1e-12;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], relative * std::max(1e-3, std::abs(want[i])))
        << "element " << i;
  }
}

TYPED_TEST(OptimizerKernelsTest, Sgd) {
  using T = TypeParam;
  const OptimizerOptions sgd{.kind = OptimizerKind::kSgd, .learning_rate = 0.1};
  std::vector<T> var = {1.0, -2.0, 0.0};
  const std::vector<T> grad = {0.5, -1.0, 4.0};
  ASSERT_TRUE(ApplyUpdateHost(sgd, Typed<T>::kDType, var.data(), grad.data(),
                              nullptr, nullptr, var.size(), 1)
                  .ok());
  ExpectNear(var, {0.95, -1.9, -0.4});
}

TYPED_TEST(OptimizerKernelsTest, Momentum) {
  using T = TypeParam;
  const OptimizerOptions momentum{
      .kind = OptimizerKind::kMomentum, .learning_rate = 0.1, .momentum = 0.9};
  std::vector<T> var = {1.0, 1.0};
  std::vector<T> m = {0.0, 1.0};
  const std::vector<T> grad = {1.0, 2.0};
  // m = 0.9 m - 0.1 g: -0.1, 0.7; var += m.
  ASSERT_TRUE(ApplyUpdateHost(momentum, Typed<T>::kDType, var.data(),
                              grad.data(), m.data(), nullptr, var.size(), 1)
                  .ok());
  ExpectNear(m, {-0.1, 0.7});
  ExpectNear(var, {0.9, 1.7});
  // Again: m = -0.19, 0.43.
  ASSERT_TRUE(ApplyUpdateHost(momentum, Typed<T>::kDType, var.data(),
                              grad.data(), m.data(), nullptr, var.size(), 2)
                  .ok());
  ExpectNear(m, {-0.19, 0.43});
  ExpectNear(var, {0.71, 2.13});
}

TYPED_TEST(OptimizerKernelsTest, Nesterov) {
  using T = TypeParam;
  const OptimizerOptions nesterov{.kind = OptimizerKind::kMomentum,
                                  .learning_rate = 0.1,
                                  .momentum = 0.9,
                                  .nesterov = true};
  std::vector<T> var = {1.0, 1.0};
  std::vector<T> m = {0.0, 1.0};
  const std::vector<T> grad = {1.0, 2.0};
  // m as above; var += 0.9 m - 0.1 g: -0.19, 0.43.
  ASSERT_TRUE(ApplyUpdateHost(nesterov, Typed<T>::kDType, var.data(),
                              grad.data(), m.data(), nullptr, var.size(), 1)
                  .ok());
  ExpectNear(m, {-0.1, 0.7});
  ExpectNear(var, {0.81, 1.43});
}

TYPED_TEST(OptimizerKernelsTest, Adam) {
  using T = TypeParam;
  const OptimizerOptions adam{.kind = OptimizerKind::kAdam,
                              .learning_rate = 0.001,
                              .beta1 = 0.9,
                              .beta2 = 0.999,
                              .epsilon = 1e-7};
  std::vector<T> var = {1.0, -0.5};
  std::vector<T> m = {0.0, 0.0};
  std::vector<T> v = {0.0, 0.0};
  std::vector<T> grad = {2.0, -0.1};
  // t = 1: lr_t = 0.001 * sqrt(0.001) / 0.1; the step is about lr * sign(g).
  ASSERT_TRUE(ApplyUpdateHost(adam, Typed<T>::kDType, var.data(), grad.data(),
                              m.data(), v.data(), var.size(), 1)
                  .ok());
  ExpectNear(m, {0.2, -0.01});
  ExpectNear(v, {0.004, 1e-5});
  ExpectNear(var, {0.9990000015811363, -0.49900003162177664});
  grad = {1.0, 0.3};
  ASSERT_TRUE(ApplyUpdateHost(adam, Typed<T>::kDType, var.data(), grad.data(),
                              m.data(), v.data(), var.size(), 2)
                  .ok());
  ExpectNear(m, {0.28, 0.021});
  ExpectNear(v, {0.004996, 9.999e-5});
  ExpectNear(var, {0.9980678232611518, -0.4994942165129777});
}

TEST(OptimizerKernelsTest, Slots) {
  EXPECT_EQ(SlotCount(OptimizerKind::kSgd), 0);
  EXPECT_EQ(SlotCount(OptimizerKind::kMomentum), 1);
  EXPECT_EQ(SlotCount(OptimizerKind::kAdam), 2);
  EXPECT_STREQ(SlotName(OptimizerKind::kMomentum, 0), "momentum");
  EXPECT_STREQ(SlotName(OptimizerKind::kAdam, 0), "m");
  EXPECT_STREQ(SlotName(OptimizerKind::kAdam, 1), "v");
  EXPECT_EQ(SlotName(OptimizerKind::kSgd, 0), nullptr);
}

TEST(OptimizerKernelsTest, BadArguments) {
  int32_t ints[2] = {1, 2};
  float f[2] = {1, 2};
  EXPECT_EQ(
      ApplyUpdateHost({}, DType::kInt32, ints, ints, nullptr, nullptr, 2, 1)
          .code(),
      absl::StatusCode::kInvalidArgument);
  const OptimizerOptions adam{.kind = OptimizerKind::kAdam};
  EXPECT_EQ(
      ApplyUpdateHost(adam, DType::kFloat32, f, f, f, nullptr, 2, 1).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyUpdateHost(adam, DType::kFloat32, f, f, f, f, 2, 0).code(),
            absl::StatusCode::kInvalidArgument);
}

#ifdef COHORT_HAVE_CUDA
// The device kernels against the host loop, bitwise: replicas on CPUs and
// GPUs must stay equal. `mapped`: the variable and its slots live in mapped
// host memory, as CentralStorage keeps them over several GPUs.
template <typename T>
void ExpectCudaMatchesHost(const OptimizerOptions& options, void* stream,
                           bool mapped) {
  constexpr size_t kCount = 100003;  // not a multiple of the block size
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> var(kCount), grad(kCount), m(kCount), v(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    var[i] = uniform(rng);
    grad[i] = uniform(rng);
    m[i] = uniform(rng);
    v[i] = uniform(rng) + 1.0;
  }
  const Device device{Device::Kind::kCuda, 0, stream};
  const size_t bytes = kCount * sizeof(T);
  std::vector<DeviceBuffer> buffers;
  for (const std::vector<T>* host : {&var, &grad, &m, &v}) {
    absl::StatusOr<DeviceBuffer> buffer =
        mapped && host != &grad ? DeviceBuffer::AllocateShared(device, bytes)
                                : DeviceBuffer::Allocate(device, bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(CopyToDevice(device, buffer->data(), host->data(), bytes).ok());
    buffers.push_back(*std::move(buffer));
  }
  const int slots = SlotCount(options.kind);
  for (int64_t t = 1; t <= 3; ++t) {
    ASSERT_TRUE(ApplyUpdateHost(options, Typed<T>::kDType, var.data(),
                                grad.data(), slots > 0 ? m.data() : nullptr,
                                slots > 1 ? v.data() : nullptr, kCount, t)
                    .ok());
    const absl::Status launched = ApplyUpdateCuda(
        options, Typed<T>::kDType, buffers[0].data(), buffers[1].data(),
        slots > 0 ? buffers[2].data() : nullptr,
        slots > 1 ? buffers[3].data() : nullptr, kCount, t, stream);
    ASSERT_TRUE(launched.ok()) << launched;
  }
  std::vector<T> device_var(kCount);
  ASSERT_TRUE(Synchronize(device).ok());
  ASSERT_TRUE(
      CopyToHost(device, device_var.data(), buffers[0].data(), bytes).ok());
  EXPECT_EQ(std::memcmp(device_var.data(), var.data(), bytes), 0)
      << "first elements: device " << device_var[0] << ", host " << var[0];
}

TEST(OptimizerKernelsCudaTest, MatchesHostBitwiseInDeviceAndMappedMemory) {
  if (ProbeCuda().devices.empty()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<void*> stream = CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const OptimizerOptions& options :
       {OptimizerOptions{.kind = OptimizerKind::kSgd},
        OptimizerOptions{.kind = OptimizerKind::kMomentum},
        OptimizerOptions{.kind = OptimizerKind::kMomentum, .nesterov = true},
        OptimizerOptions{.kind = OptimizerKind::kAdam}}) {
    SCOPED_TRACE(testing::Message()
                 << "optimizer kind " << static_cast<int>(options.kind)
                 << (options.nesterov ? " nesterov" : ""));
    for (bool mapped : {false, true}) {
      SCOPED_TRACE(mapped ? "mapped host memory" : "device memory");
      ExpectCudaMatchesHost<float>(options, *stream, mapped);
      ExpectCudaMatchesHost<double>(options, *stream, mapped);
    }
  }
  DestroyStream(0, *stream);
}
#endif

}  // namespace
}  // namespace cohort::agent
