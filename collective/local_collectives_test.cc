// The collective algorithms with ranks as threads (LocalTransport), checked
// against a reference reduction for every rank count, size, dtype and op.

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collective/algorithmic_communicator.h"
#include "collective/metered_communicator.h"
#include "collective/reduce.h"
#include "collective/transports/local_transport.h"
#include "common/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_reference.h"
#include "tests/testing/forwarding_transport.h"
#include "tests/testing/rank_threads.h"
#include "tests/testing/wait.h"

namespace cohort::collective {
namespace {

using ::testing::HasSubstr;

// Which ranks' transports favour exchanges, as transports over sockets do.
enum class Exchanges { kNone, kAll, kRankZero };

// Runs `body(rank, communicator)` on one thread per rank of a fresh group.
std::vector<absl::Status> RunGroup(
    int n, const std::function<absl::Status(int, Communicator&)>& body,
    CommunicatorOptions options = {}, Exchanges exchanges = Exchanges::kNone) {
  LocalHub hub(n);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    std::unique_ptr<Transport> transport = hub.Connect(r);
    if (exchanges == Exchanges::kAll ||
        (exchanges == Exchanges::kRankZero && r == 0)) {
      transport =
          std::make_unique<testing::ExchangingTransport>(std::move(transport));
    }
    comms.push_back(std::make_unique<AlgorithmicCommunicator>(
        std::move(transport), options));
  }
  return testing::RunOnRankThreads(comms, body);
}

using testing::AllDTypeOps;
using testing::DTypeOp;

std::vector<char> Inputs(int rank, size_t count, DType dtype) {
  return testing::ReferenceInputs(rank, count, dtype);
}

std::vector<char> Reference(int n, size_t count, DType dtype, ReduceOp op) {
  return testing::ReferenceReduction(n, count, dtype, op);
}

// Every rank's all-reduce of every size, dtype and op equals the reference.
void ExpectEveryAllReduceMatches(int n, Exchanges exchanges) {
  // 100003: past the one-shot path, and within the direct path's bound.
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, size_t{100003}, size_t{1} << 20}) {
    for (const DTypeOp& combo : AllDTypeOps()) {
      const std::vector<char> expected =
          Reference(n, count, combo.dtype, combo.op);
      std::vector<std::vector<char>> data;
      for (int r = 0; r < n; ++r) data.push_back(Inputs(r, count, combo.dtype));
      // Small chunks so that even 7 elements cross chunk boundaries.
      const auto results = RunGroup(
          n,
          [&](int r, Communicator& comm) {
            return comm.AllReduce(data[r].data(), count, combo.dtype, combo.op);
          },
          {.chunk_bytes = count < 100 ? 4 : size_t{1} << 18}, exchanges);
      for (int r = 0; r < n; ++r) {
        const std::string what =
            absl::StrCat(n, " ranks, ", count, " x ", DTypeName(combo.dtype),
                         " ", ReduceOpName(combo.op), ", rank ", r);
        ASSERT_TRUE(results[r].ok()) << what << ": " << results[r];
        ASSERT_TRUE(data[r] == expected) << what;
      }
    }
  }
}

class AllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceTest, MatchesReferenceForEverySizeDtypeAndOp) {
  ExpectEveryAllReduceMatches(GetParam(), Exchanges::kNone);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduceTest,
                         ::testing::Values(1, 2, 3, 4, 8));

// Over transports that favour exchanges: the direct path among 3 to 16
// ranks, the ring between 2.
class ExchangingAllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(ExchangingAllReduceTest, MatchesReferenceForEverySizeDtypeAndOp) {
  ExpectEveryAllReduceMatches(GetParam(), Exchanges::kAll);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExchangingAllReduceTest,
                         ::testing::Values(2, 3, 4, 8, 16));

TEST(AllReduceTest, SixtyFourMebibytesForEveryDtypeAndOp) {
  for (int n : {2, 4}) {
    for (const DTypeOp& combo : AllDTypeOps()) {
      const size_t count = (size_t{64} << 20) / DTypeSize(combo.dtype);
      const std::vector<char> expected =
          Reference(n, count, combo.dtype, combo.op);
      std::vector<std::vector<char>> data;
      for (int r = 0; r < n; ++r) data.push_back(Inputs(r, count, combo.dtype));
      const auto results = RunGroup(n, [&](int r, Communicator& comm) {
        return comm.AllReduce(data[r].data(), count, combo.dtype, combo.op);
      });
      for (int r = 0; r < n; ++r) {
        const std::string what =
            absl::StrCat(n, " ranks, 64 MiB of ", DTypeName(combo.dtype), " ",
                         ReduceOpName(combo.op), ", rank ", r);
        ASSERT_TRUE(results[r].ok()) << what << ": " << results[r];
        ASSERT_TRUE(data[r] == expected) << what;
      }
    }
  }
}

TEST(AllReduceTest, SixtyFourMebibytesOfFloat32AtOtherRankCounts) {
  const size_t count = (size_t{64} << 20) / 4;
  for (int n : {1, 3, 8}) {
    const std::vector<char> expected =
        Reference(n, count, DType::kFloat32, ReduceOp::kSum);
    std::vector<std::vector<char>> data;
    for (int r = 0; r < n; ++r)
      data.push_back(Inputs(r, count, DType::kFloat32));
    const auto results = RunGroup(n, [&](int r, Communicator& comm) {
      return comm.AllReduce(data[r].data(), count, DType::kFloat32,
                            ReduceOp::kSum);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(results[r].ok()) << results[r];
      ASSERT_TRUE(data[r] == expected) << n << " ranks, rank " << r;
    }
  }
}

// Inexact float inputs, so that a different summation order would show: the
// one-shot path (small buffers), the ring and the direct path must each
// give the same bits on every rank and in every run.
TEST(AllReduceTest, BitwiseReproducibleAndIdenticalOnEveryRank) {
  const int n = 4;
  for (size_t count : {size_t{1000}, size_t{100003}}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
      for (Exchanges exchanges : {Exchanges::kNone, Exchanges::kAll}) {
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0, 1e3);
        std::vector<std::vector<float>> inputs(n, std::vector<float>(count));
        for (auto& input : inputs)
          for (float& x : input) x = normal(rng);

        auto run = [&] {
          std::vector<std::vector<float>> data = inputs;
          const auto results = RunGroup(
              n,
              [&](int r, Communicator& comm) {
                return comm.AllReduce(data[r].data(), count, DType::kFloat32,
                                      op);
              },
              {.chunk_bytes = 4096}, exchanges);
          for (const auto& status : results) EXPECT_TRUE(status.ok()) << status;
          return data;
        };
        const auto first = run();
        const auto second = run();
        const std::string where = absl::StrCat(
            count, " x ", ReduceOpName(op),
            exchanges == Exchanges::kAll ? ", exchanges" : ", ring", ", rank ");
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(std::memcmp(first[r].data(), first[0].data(), count * 4), 0)
              << where << r;
          EXPECT_EQ(std::memcmp(first[r].data(), second[r].data(), count * 4),
                    0)
              << where << r;
        }
      }
    }
  }
}

class ReduceToRootTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceToRootTest, TheRootGetsTheReferenceAndTheOthersKeepTheirInputs) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1} << 20}) {
    for (const DTypeOp& combo : AllDTypeOps()) {
      for (int root : {0, n - 1}) {
        std::vector<std::vector<char>> data;
        for (int r = 0; r < n; ++r)
          data.push_back(Inputs(r, count, combo.dtype));
        const auto results =
            RunGroup(n,
                     [&](int r, Communicator& comm) {
                       return comm.Reduce(data[r].data(), count, combo.dtype,
                                          combo.op, root);
                     },
                     {.chunk_bytes = count < 100 ? 4 : size_t{1} << 18});
        for (int r = 0; r < n; ++r) {
          const std::string what = absl::StrCat(
              n, " ranks, ", count, " x ", DTypeName(combo.dtype), " ",
              ReduceOpName(combo.op), ", root ", root, ", rank ", r);
          ASSERT_TRUE(results[r].ok()) << what << ": " << results[r];
          ASSERT_TRUE(data[r] ==
                      (r == root ? Reference(n, count, combo.dtype, combo.op)
                                 : Inputs(r, count, combo.dtype)))
              << what;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReduceToRootTest,
                         ::testing::Values(1, 2, 3, 5));

TEST(ReduceToRootTest, ARootOutOfRangeIsRefusedNamingIt) {
  const auto results = RunGroup(2, [](int, Communicator& comm) {
    float x = 1;
    return comm.Reduce(&x, 1, DType::kFloat32, ReduceOp::kSum, 2);
  });
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(),
                HasSubstr("reduce root 2 is out of range: the group has 2"));
  }
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, BroadcastAllGatherReduceScatterAndBarrier) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1} << 20}) {
    for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat16}) {
      const size_t element = DTypeSize(dtype);
      const std::string what =
          absl::StrCat(n, " ranks, ", count, " x ", DTypeName(dtype));
      // Broadcast from the last rank.
      const int root = n - 1;
      std::vector<std::vector<char>> data;
      for (int r = 0; r < n; ++r) data.push_back(Inputs(r, count, dtype));
      auto results =
          RunGroup(n,
                   [&](int r, Communicator& comm) {
                     return comm.Broadcast(data[r].data(), count, dtype, root);
                   },
                   {.chunk_bytes = count < 100 ? 4 : size_t{1} << 18});
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok()) << what << results[r];
        ASSERT_TRUE(data[r] == Inputs(root, count, dtype))
            << what << " broadcast rank " << r;
      }

      // All-gather: block q of every output is rank q's input.
      std::vector<std::vector<char>> gathered(
          n, std::vector<char>(n * count * element));
      results = RunGroup(n, [&](int r, Communicator& comm) {
        const std::vector<char> input = Inputs(r, count, dtype);
        return comm.AllGather(input.data(), gathered[r].data(), count, dtype);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok()) << what << results[r];
        for (int q = 0; q < n; ++q) {
          const std::vector<char> block = Inputs(q, count, dtype);
          ASSERT_TRUE(
              testing::SameBytes(gathered[r].data() + q * count * element,
                                 block.data(), block.size()))
              << what << " allgather rank " << r << " block " << q;
        }
      }

      // Reduce-scatter (SUM): rank r gets block r of the reference.
      const std::vector<char> full =
          Reference(n, n * count, dtype, ReduceOp::kSum);
      std::vector<std::vector<char>> scattered(
          n, std::vector<char>(count * element));
      results = RunGroup(n, [&](int r, Communicator& comm) {
        const std::vector<char> input = Inputs(r, n * count, dtype);
        return comm.ReduceScatter(input.data(), scattered[r].data(), count,
                                  dtype, ReduceOp::kSum);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(results[r].ok()) << what << results[r];
        ASSERT_TRUE(testing::SameBytes(scattered[r].data(),
                                       full.data() + r * count * element,
                                       count * element))
            << what << " reducescatter rank " << r;
      }
    }
  }
  const auto barrier =
      RunGroup(n, [](int, Communicator& comm) { return comm.Barrier(); });
  for (const auto& status : barrier) EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest,
                         ::testing::Values(1, 2, 3, 4, 8));

// Rank r's input for the comparison of paths: inexact values, with zeros of
// both signs and NaNs among them where the type has them, since MIN and MAX
// of those, and a sum of NaNs, show the order of the operands.
std::vector<char> AwkwardInputs(int rank, size_t count, DType dtype) {
  std::mt19937 rng(static_cast<uint32_t>(rank) * 7919 + 1);
  std::normal_distribution<double> normal(0, 1e3);
  std::vector<char> out(count * DTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    double x = normal(rng);
    if (i % 13 == 0) x = rank % 2 == 0 ? 0.0 : -0.0;
    if (i % 29 == 0 && (rank + i) % 3 == 0) {
      x = rank % 2 == 0 ? std::nan("1") : -std::nan("2");
    }
    const bool integral = dtype == DType::kInt32 || dtype == DType::kInt64;
    testing::StoreAs(integral && std::isnan(x) ? -1 : x, dtype,
                     out.data() + i * DTypeSize(dtype));
  }
  return out;
}

// Whether `a` and `b` hold the same bits, where a NaN may stand for any NaN:
// which of two NaNs a sum returns is the compiler's choice of operand order,
// which C++ does not fix.
bool SameBitsOrBothNaN(const std::vector<char>& a, const std::vector<char>& b,
                       DType dtype) {
  if (a.size() != b.size()) return false;
  const size_t size = DTypeSize(dtype);
  for (size_t at = 0; at < a.size(); at += size) {
    if (std::memcmp(a.data() + at, b.data() + at, size) == 0) continue;
    auto is_nan = [&](const char* p) {
      switch (dtype) {
        case DType::kFloat32: {
          float v;
          std::memcpy(&v, p, sizeof(v));
          return std::isnan(v);
        }
        case DType::kFloat64: {
          double v;
          std::memcpy(&v, p, sizeof(v));
          return std::isnan(v);
        }
        case DType::kFloat16: {
          uint16_t v;
          std::memcpy(&v, p, sizeof(v));
          return std::isnan(HalfToFloat(v));
        }
        case DType::kBFloat16: {
          uint16_t v;
          std::memcpy(&v, p, sizeof(v));
          return std::isnan(BFloat16ToFloat(v));
        }
        default:
          return false;
      }
    };
    if (!is_nan(a.data() + at) || !is_nan(b.data() + at)) return false;
  }
  return true;
}

// The direct path adds in the ring's order with the ring's operands, so a
// job's variables do not depend on which of the two its layout chose.
TEST(AllReduceTest, TheDirectPathGivesTheRingsBitsForEveryDtypeAndOp) {
  for (int n : {3, 4, 5, 8}) {
    // Past the one-shot path's 32 KiB in every dtype; 20481 float32 among 4
    // makes segments of 6 chunks and of 5.
    for (size_t count : {size_t{20481}, size_t{100003}}) {
      for (const DTypeOp& combo : AllDTypeOps()) {
        auto run = [&](Exchanges exchanges) {
          std::vector<std::vector<char>> data;
          for (int r = 0; r < n; ++r) {
            data.push_back(AwkwardInputs(r, count, combo.dtype));
          }
          const auto results = RunGroup(
              n,
              [&](int r, Communicator& comm) {
                return comm.AllReduce(data[r].data(), count, combo.dtype,
                                      combo.op);
              },
              {.chunk_bytes = 4096}, exchanges);
          for (const auto& status : results) EXPECT_TRUE(status.ok()) << status;
          return data;
        };
        const auto ring = run(Exchanges::kNone);
        const auto direct = run(Exchanges::kAll);
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(SameBitsOrBothNaN(direct[r], ring[r], combo.dtype))
              << n << " ranks, " << count << " x " << DTypeName(combo.dtype)
              << " " << ReduceOpName(combo.op) << ", rank " << r;
        }
      }
    }
  }
}

// What a trace says of each collective: the path its size takes, and with
// whom this rank exchanges data on it.
TEST(RouteTest, NamesThePathEachAllReduceTakesAndItsPeers) {
  LocalHub hub(4);
  AlgorithmicCommunicator plain(hub.Connect(1));
  AlgorithmicCommunicator exchanging(
      std::make_unique<testing::ExchangingTransport>(hub.Connect(2)));
  EXPECT_EQ(plain.Route("allreduce", 1024), "one-shot: all 4 ranks");
  EXPECT_EQ(plain.Route("allreduce", 1 << 20), "ring: ranks 0 -> 1 -> 2");
  EXPECT_EQ(exchanging.Route("allreduce", 1 << 20), "direct: all 4 ranks");
  EXPECT_EQ(exchanging.Route("allreduce", 64 << 20), "ring: ranks 1 -> 2 -> 3");
  EXPECT_EQ(plain.Route("allgather", 1024), "ring: ranks 0 -> 1 -> 2");
  EXPECT_EQ(plain.Route("barrier", 0), "dissemination: all 4 ranks");
}

TEST(RouteTest, AMeteredCollectivesSpanCarriesItsRoute) {
  LocalHub hub(2);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < 2; ++r) {
    comms.push_back(std::make_unique<MeteredCommunicator>(
        std::make_unique<AlgorithmicCommunicator>(hub.Connect(r)), "ring"));
  }
  std::vector<std::unique_ptr<TraceRecorder>> recorders;
  for (int r = 0; r < 2; ++r) {
    recorders.push_back(std::make_unique<TraceRecorder>(16));
  }
  std::vector<std::vector<float>> data(2, std::vector<float>(1 << 18, 1.0f));
  const auto results =
      testing::RunOnRankThreads(comms, [&](int r, Communicator& comm) {
        TraceRecorder::Scope scope(recorders[r].get());
        return comm.AllReduce(data[r].data(), data[r].size(), DType::kFloat32,
                              ReduceOp::kSum);
      });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    int64_t dropped = 0;
    const std::vector<TraceEvent> events = recorders[r]->Events(&dropped);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_STREQ(events[0].name, "allreduce");
    std::string route;
    for (const auto& [key, value] : events[0].args) {
      if (std::string_view(key) == "route") route = value;
    }
    EXPECT_EQ(route, comms[r]->Route("allreduce", 1 << 20));
    EXPECT_EQ(comms[r]->Route("allreduce", 1 << 20),
              r == 0 ? "ring: ranks 1 -> 0 -> 1" : "ring: ranks 0 -> 1 -> 0");
  }
}

TEST(FailureTest, MismatchedCollectivesFailOnBothSidesNamingBoth) {
  std::vector<float> reduced(1000, 1.0f), input(10, 1.0f), gathered(20);
  const auto results =
      RunGroup(2,
               [&](int r, Communicator& comm) {
                 return r == 0 ? comm.AllReduce(reduced.data(), 1000,
                                                DType::kFloat32, ReduceOp::kSum)
                               : comm.AllGather(input.data(), gathered.data(),
                                                10, DType::kFloat32);
               },
               {.timeout = absl::Seconds(10)});
  for (const absl::Status& status : results) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("allreduce float32 sum 1000"));
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("allgather float32 10"));
  }
}

// Ranks must agree on the algorithm as on the collective: one whose
// transport favours exchanges, among three whose transports do not, fails
// with the others at once, and the path each chose is named.
TEST(FailureTest, RanksThatChoseDifferentAllReducePathsFailNamingThem) {
  std::vector<std::vector<float>> data(4, std::vector<float>(1 << 16, 1.0f));
  const auto results = RunGroup(
      4,
      [&](int r, Communicator& comm) {
        return comm.AllReduce(data[r].data(), data[r].size(), DType::kFloat32,
                              ReduceOp::kSum);
      },
      {.timeout = absl::Seconds(30)}, Exchanges::kRankZero);
  bool named = false;
  for (const absl::Status& status : results) {
    EXPECT_FALSE(status.ok());
    // At once: the mismatch is seen, not the 30 s deadline waited out.
    EXPECT_NE(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    if (status.code() == absl::StatusCode::kFailedPrecondition) {
      const std::string message(status.message());
      named = named || (absl::StrContains(message, "direct") &&
                        absl::StrContains(message, "ring"));
    }
  }
  EXPECT_TRUE(named) << results[0] << "; " << results[1];
}

TEST(FailureTest, MissingRankEndsInADeadlineOnEveryRank) {
  // A buffer per rank: ranks reduce into their own (TSan).
  std::vector<std::vector<float>> data(3, std::vector<float>(10, 1.0f));
  const absl::Time start = absl::Now();
  const auto results =
      RunGroup(3,
               [&](int r, Communicator& comm) {
                 if (r == 2) return absl::OkStatus();  // never joins
                 return comm.AllReduce(data[r].data(), 10, DType::kFloat32,
                                       ReduceOp::kSum);
               },
               {.timeout = absl::Milliseconds(300)});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The first rank to time out aborts the group, so both fail at once with
  // its DEADLINE_EXCEEDED, whichever peer it was waiting on.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kDeadlineExceeded)
        << results[r];
    EXPECT_THAT(std::string(results[r].message()),
                HasSubstr("before the deadline"));
  }
}

TEST(FailureTest, AbortFailsPendingAndLaterOperations) {
  LocalHub hub(2);
  AlgorithmicCommunicator comm(hub.Connect(0), {.timeout = absl::Seconds(30)});
  std::vector<float> data(10, 1.0f);
  absl::Status pending;
  std::thread waiter([&] {
    pending = comm.AllReduce(data.data(), 10, DType::kFloat32, ReduceOp::kSum);
  });
  // Abort only once the operation waits on its missing peer.
  EXPECT_TRUE(testing::WaitUntil([&] { return hub.waiting(0) == 1; },
                                 absl::Seconds(10), absl::Milliseconds(1)));
  const absl::Time aborted = absl::Now();
  comm.Abort(absl::AbortedError("job cancelled"));
  waiter.join();
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(1));
  EXPECT_EQ(pending.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(pending.message()), HasSubstr("job cancelled"));
  const absl::Status later = comm.Barrier();
  EXPECT_EQ(later.code(), absl::StatusCode::kAborted);
}

TEST(FailureTest, BadArgumentsAreRefusedBeforeAnyTraffic) {
  LocalHub hub(2);
  AlgorithmicCommunicator comm(hub.Connect(0));
  uint16_t half[4] = {};
  EXPECT_EQ(comm.AllReduce(half, 4, DType::kFloat16, ReduceOp::kMax).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.Broadcast(half, 4, DType::kFloat16, 5).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::collective
