#include "collective/transports/lent_buffers.h"

#include <optional>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace cohort::collective {
namespace {

TEST(LentBuffersTest, ASliceReferencesTheBufferUntilEveryCopyIsGone) {
  LentBuffers lent;
  char data[] = "payload";
  std::optional<grpc::Slice> slice = lent.Lend(data, sizeof(data));
  EXPECT_EQ(slice->begin(), reinterpret_cast<const uint8_t*>(data));
  std::optional<grpc::Slice> copy = *slice;  // another reference, as gRPC takes
  slice.reset();
  EXPECT_EQ(lent.outstanding(), 1u);
  EXPECT_FALSE(lent.AwaitReleased(absl::Now() + absl::Milliseconds(10)));
  copy.reset();
  EXPECT_EQ(lent.outstanding(), 0u);
  EXPECT_TRUE(lent.AwaitReleased(absl::Now()));
}

TEST(LentBuffersTest, AwaitReleasedWakesWhenAnotherThreadReleases) {
  LentBuffers lent;
  char data[64] = {};
  std::optional<grpc::Slice> first = lent.Lend(data, 32);
  std::optional<grpc::Slice> second = lent.Lend(data + 32, 32);
  EXPECT_EQ(lent.outstanding(), 2u);
  std::thread releaser([&] {
    first.reset();
    second.reset();
  });
  EXPECT_TRUE(lent.AwaitReleased(absl::Now() + absl::Seconds(30)));
  releaser.join();
}

}  // namespace
}  // namespace cohort::collective
