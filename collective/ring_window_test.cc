// The pipelined algorithms (ring, direct) over a transport whose
// Send blocks once a link holds its capacity, as the shared-memory ring
// does: they must stay within the window they are given, or the group would
// wait on itself.

#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective/algorithmic_communicator.h"
#include "collective/transports/local_transport.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_reference.h"
#include "tests/testing/forwarding_transport.h"
#include "tests/testing/rank_threads.h"

namespace cohort::collective {
namespace {

// Bytes sent on each directed link and not yet received. Thread-safe.
class Links {
 public:
  Links(int size, size_t capacity)
      : size_(static_cast<size_t>(size)),
        capacity_(capacity),
        held_(size_ * size_, 0) {}

  size_t capacity() const { return capacity_; }

  // Waits until `bytes` more fit on from -> to. False at the deadline.
  bool Reserve(int from, int to, size_t bytes, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    size_t& held = held_[Index(from, to)];
    auto fits = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return held + bytes <= capacity_;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&fits), deadline)) return false;
    held += bytes;
    return true;
  }
  void Release(int from, int to, size_t bytes) {
    absl::MutexLock lock(&mu_);
    held_[Index(from, to)] -= bytes;
  }

 private:
  size_t Index(int from, int to) const {
    return static_cast<size_t>(from) * size_ + static_cast<size_t>(to);
  }

  const size_t size_;
  const size_t capacity_;
  absl::Mutex mu_;
  std::vector<size_t> held_ ABSL_GUARDED_BY(mu_);
};

// A LocalTransport whose links hold at most `links->capacity()` bytes,
// favouring exchanges or not.
class BoundedTransport final : public testing::ForwardingTransport {
 public:
  BoundedTransport(std::unique_ptr<Transport> inner, Links* links,
                   bool exchanges)
      : ForwardingTransport(std::move(inner)),
        links_(links),
        exchanges_(exchanges) {}

  size_t send_window_bytes() const override { return links_->capacity() / 2; }
  bool favours_exchanges() const override { return exchanges_; }

  absl::Status Send(int peer, const Envelope& envelope, const void* data,
                    size_t bytes, absl::Time deadline) override {
    if (!links_->Reserve(rank(), peer, bytes, deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank(), " found no room on its link to ", peer, " for step ",
          envelope.tag.step, " chunk ", envelope.tag.chunk));
    }
    return ForwardingTransport::Send(peer, envelope, data, bytes, deadline);
  }
  // Lent or not, a send takes room on the link.
  absl::Status SendLent(int peer, const Envelope& envelope, const void* data,
                        size_t bytes, absl::Time deadline) override {
    return Send(peer, envelope, data, bytes, deadline);
  }
  absl::Status Recv(int peer, const Envelope& envelope, void* data,
                    size_t bytes, absl::Time deadline) override {
    absl::Status status =
        ForwardingTransport::Recv(peer, envelope, data, bytes, deadline);
    if (status.ok()) links_->Release(peer, rank(), bytes);
    return status;
  }
  absl::StatusOr<absl::Cord> RecvCord(int peer, const Envelope& envelope,
                                      size_t bytes,
                                      absl::Time deadline) override {
    absl::StatusOr<absl::Cord> got =
        ForwardingTransport::RecvCord(peer, envelope, bytes, deadline);
    if (got.ok()) links_->Release(peer, rank(), bytes);
    return got;
  }

 private:
  Links* const links_;
  const bool exchanges_;
};

std::vector<absl::Status> RunBounded(
    int n, size_t capacity,
    const std::function<absl::Status(int, Communicator&)>& body,
    bool exchanges = false) {
  LocalHub hub(n);
  Links links(n, capacity);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_unique<AlgorithmicCommunicator>(
        std::make_unique<BoundedTransport>(hub.Connect(r), &links, exchanges),
        CommunicatorOptions{.timeout = absl::Seconds(30), .chunk_bytes = 256}));
  }
  return testing::RunOnRankThreads(comms, body);
}

// Every rank's all-reduce of `count` float32 under `op` over links of
// `capacity` bytes equals the reference.
void ExpectAllReduceFits(int n, size_t capacity, size_t count, ReduceOp op,
                         bool exchanges) {
  const std::string what =
      absl::StrCat(n, " ranks, ", count, " float32 ", ReduceOpName(op),
                   exchanges ? ", exchanges" : ", ring");
  std::vector<std::vector<char>> data;
  for (int r = 0; r < n; ++r) {
    data.push_back(testing::ReferenceInputs(r, count, DType::kFloat32));
  }
  const auto reduced = RunBounded(
      n, capacity,
      [&](int r, Communicator& c) {
        return c.AllReduce(data[r].data(), count, DType::kFloat32, op);
      },
      exchanges);
  const std::vector<char> expected =
      testing::ReferenceReduction(n, count, DType::kFloat32, op);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(reduced[r].ok())
        << what << ", rank " << r << ": " << reduced[r];
    EXPECT_TRUE(data[r] == expected) << what << ", rank " << r;
  }
}

constexpr size_t kCapacity = 1024;

class RingWindowTest : public ::testing::TestWithParam<int> {};

// A 1 KiB link and 256-byte chunks: every segment is many chunks, and every
// step's chunks overlap the next step's, all within two chunks in flight.
TEST_P(RingWindowTest, AllReduceReduceScatterAndAllGatherFitASmallLink) {
  const int n = GetParam();
  for (size_t count : {size_t{257}, size_t{1000}, size_t{4099}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      ExpectAllReduceFits(n, kCapacity, count, op, /*exchanges=*/false);
    }

    std::vector<std::vector<float>> gathered(static_cast<size_t>(n),
                                             std::vector<float>(count * n));
    const auto gather = RunBounded(n, kCapacity, [&](int r, Communicator& c) {
      std::vector<float> mine(count, static_cast<float>(r + 1));
      return c.AllGather(mine.data(), gathered[r].data(), count,
                         DType::kFloat32);
    });
    std::vector<std::vector<float>> scattered(static_cast<size_t>(n),
                                              std::vector<float>(count));
    const auto scatter = RunBounded(n, kCapacity, [&](int r, Communicator& c) {
      std::vector<float> input(count * n, static_cast<float>(r + 1));
      return c.ReduceScatter(input.data(), scattered[r].data(), count,
                             DType::kFloat32, ReduceOp::kSum);
    });
    const float sum = static_cast<float>(n * (n + 1) / 2);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(gather[r].ok()) << gather[r];
      ASSERT_TRUE(scatter[r].ok()) << scatter[r];
      for (size_t i = 0; i < count * n; ++i) {
        ASSERT_EQ(gathered[r][i], static_cast<float>(i / count + 1))
            << n << " ranks, allgather of " << count << ", rank " << r
            << ", element " << i;
      }
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(scattered[r][i], sum)
            << n << " ranks, reducescatter of " << count << ", rank " << r
            << ", element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingWindowTest, ::testing::Values(2, 3, 4, 5));

class DirectWindowTest : public ::testing::TestWithParam<int> {};

// The same links for the direct path: every rank sends to all its peers
// within the window before it receives, and no send waits.
TEST_P(DirectWindowTest, AllReduceFitsASmallLink) {
  for (size_t count : {size_t{257}, size_t{1000}, size_t{4099}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      ExpectAllReduceFits(GetParam(), kCapacity, count, op,
                          /*exchanges=*/true);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DirectWindowTest, ::testing::Values(3, 4, 8));

}  // namespace
}  // namespace cohort::collective
