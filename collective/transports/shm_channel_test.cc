#include "collective/transports/shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

std::string UniqueName(const char* what) {
  return absl::StrCat("/cohort-test-", getpid(), "-", what);
}

absl::Status NeverInterrupted() { return absl::OkStatus(); }

TEST(ShmChannelTest, RingsOfExitedCreatorsAreRemovedAndLiveOnesKept) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  // A ring named as the exited child would have named it.
  std::string stale = RingName("stale-0-1");
  const std::string ours = absl::StrCat("-", getpid(), "-");
  stale.replace(stale.find(ours), ours.size(), absl::StrCat("-", child, "-"));
  const std::string live = RingName("live-0-1");
  auto left = ShmChannel::Create(stale, 4096);
  ASSERT_TRUE(left.ok()) << left.status();
  auto kept = ShmChannel::Create(live, 4096);
  ASSERT_TRUE(kept.ok()) << kept.status();

  EXPECT_GE(RemoveStaleRings(), 1);
  EXPECT_FALSE(ShmChannel::Open(stale).ok());
  EXPECT_TRUE(ShmChannel::Open(live).ok());
}

TEST(ShmChannelTest, StreamsMessagesLargerThanTheRing) {
  const std::string name = UniqueName("stream");
  auto reader = ShmChannel::Create(name, 4096);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto writer = ShmChannel::Open(name);
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*reader)->Unlink();

  std::vector<uint32_t> sent(1 << 20);  // 4 MiB through a 4 KiB ring
  std::iota(sent.begin(), sent.end(), 7);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status wrote;
  std::thread producer([&] {
    wrote = (*writer)->Write(sent.data(), sent.size() * 4, deadline,
                             NeverInterrupted);
  });
  std::vector<uint32_t> received(sent.size());
  const absl::Status read = (*reader)->Read(
      received.data(), received.size() * 4, deadline, NeverInterrupted);
  producer.join();
  ASSERT_TRUE(wrote.ok()) << wrote;
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_TRUE(received == sent);
}

TEST(ShmChannelTest, WaitsEndOnInterruptOrDeadline) {
  const std::string name = UniqueName("waits");
  auto reader = ShmChannel::Create(name, 4096);
  ASSERT_TRUE(reader.ok()) << reader.status();
  char byte;
  const absl::Time start = absl::Now();
  absl::Status status = (*reader)->Read(
      &byte, 1, absl::Now() + absl::Milliseconds(50), NeverInterrupted);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  status = (*reader)->Read(&byte, 1, absl::Now() + absl::Seconds(30), [] {
    return absl::UnavailableError("rank 1 (127.0.0.1:4001) is gone");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("rank 1"));
}

TEST(ShmChannelTest, ACounterOutOfTheRingsBoundsIsAnErrorNotAStrayCopy) {
  const std::string name = UniqueName("corrupt");
  auto reader = ShmChannel::Create(name, 4096);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto writer = ShmChannel::Open(name);
  ASSERT_TRUE(writer.ok()) << writer.status();
  // Something other than the writer moves the ring's head (the header's
  // first word) far past anything written.
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  void* header = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(header, MAP_FAILED);
  static_cast<std::atomic<uint64_t>*>(header)->store(1 << 20);
  (*reader)->Unlink();

  std::vector<char> buffer(64);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::Status status =
      (*reader)->Read(buffer.data(), buffer.size(), deadline, NeverInterrupted);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("corrupt ring: its counters put 1048576 bytes in a "
                        "ring of 4096"));
  status = (*writer)->Write(buffer.data(), buffer.size(), deadline,
                            NeverInterrupted);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  munmap(header, 4096);
}

TEST(ShmChannelTest, OpeningSomethingElseIsRefused) {
  EXPECT_FALSE(ShmChannel::Open(UniqueName("absent")).ok());
  const std::string name = UniqueName("twice");
  auto first = ShmChannel::Create(name, 4096);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(ShmChannel::Create(name, 4096).ok());  // names are exclusive
}

}  // namespace
}  // namespace cohort::collective
