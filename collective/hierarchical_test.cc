// Hierarchical collectives with nodes of threads: a LocalHub per node and
// one among the leaders, checked against the reference for several shapes.

#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/algorithmic_communicator.h"
#include "collective/hierarchical_communicator.h"
#include "collective/transports/local_transport.h"
#include "gtest/gtest.h"
#include "tests/testing/collective_reference.h"
#include "tests/testing/rank_threads.h"

namespace cohort::collective {
namespace {

struct Shape {
  int nodes;
  int local;
};

// Runs `body(global_rank, communicator)` on one thread per rank.
std::vector<absl::Status> RunHierarchy(
    Shape shape, const std::function<absl::Status(int, Communicator&)>& body,
    LocalReduction local_reduction = LocalReduction::kAllReduce) {
  std::vector<std::unique_ptr<LocalHub>> node_hubs;
  for (int n = 0; n < shape.nodes; ++n) {
    node_hubs.push_back(std::make_unique<LocalHub>(shape.local));
  }
  LocalHub cross_hub(shape.nodes);
  const int size = shape.nodes * shape.local;
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int g = 0; g < size; ++g) {
    const int node = g / shape.local;
    const int local_rank = g % shape.local;
    // As the agent wires it: one node has no cross-node group at all.
    std::unique_ptr<Communicator> cross;
    if (local_rank == 0 && shape.nodes > 1) {
      cross =
          std::make_unique<AlgorithmicCommunicator>(cross_hub.Connect(node));
    }
    comms.push_back(std::make_unique<HierarchicalCommunicator>(
        std::make_unique<AlgorithmicCommunicator>(
            node_hubs[node]->Connect(local_rank)),
        std::move(cross), shape.nodes, node, local_reduction));
  }
  return testing::RunOnRankThreads(comms, body);
}

TEST(HierarchicalRouteTest, NamesTheLocalRouteAndOnALeaderTheAgents) {
  LocalHub node(2), cross(3);
  HierarchicalCommunicator leader(
      std::make_unique<AlgorithmicCommunicator>(node.Connect(0)),
      std::make_unique<AlgorithmicCommunicator>(cross.Connect(1)), 3, 1);
  HierarchicalCommunicator other(
      std::make_unique<AlgorithmicCommunicator>(node.Connect(1)), nullptr, 3,
      1);
  EXPECT_EQ(leader.Route("allreduce", 1 << 20),
            "local ring: ranks 1 -> 0 -> 1; agents ring: ranks 0 -> 1 -> 2");
  EXPECT_EQ(other.Route("allreduce", 1 << 20), "local ring: ranks 0 -> 1 -> 0");
}

class HierarchicalTest : public ::testing::TestWithParam<Shape> {};

TEST_P(HierarchicalTest, EveryCollectiveMatchesTheReference) {
  const Shape shape = GetParam();
  const int n = shape.nodes * shape.local;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
    for (const testing::DTypeOp& pair : testing::AllDTypeOps()) {
      const std::string what =
          absl::StrCat(shape.nodes, "x", shape.local, " ", count, " ",
                       DTypeName(pair.dtype), " ", ReduceOpName(pair.op));
      const std::vector<char> expected =
          testing::ReferenceReduction(n, count, pair.dtype, pair.op);
      // Both intra-node reductions: a copy ring, and to the leader.
      for (LocalReduction local :
           {LocalReduction::kAllReduce, LocalReduction::kToLeader}) {
        std::vector<std::vector<char>> data(n);
        for (int g = 0; g < n; ++g)
          data[g] = testing::ReferenceInputs(g, count, pair.dtype);
        auto results = RunHierarchy(
            shape,
            [&](int g, Communicator& comm) {
              EXPECT_EQ(comm.rank(), g);
              EXPECT_EQ(comm.size(), n);
              return comm.AllReduce(data[g].data(), count, pair.dtype, pair.op);
            },
            local);
        for (int g = 0; g < n; ++g) {
          ASSERT_TRUE(results[g].ok()) << what << results[g];
          ASSERT_TRUE(data[g] == expected)
              << what << " rank " << g
              << (local == LocalReduction::kToLeader ? " (to the leader)" : "");
        }
      }
      // Reduce to the last rank: the others keep their inputs.
      std::vector<std::vector<char>> data(n);
      for (int g = 0; g < n; ++g)
        data[g] = testing::ReferenceInputs(g, count, pair.dtype);
      auto results = RunHierarchy(shape, [&](int g, Communicator& comm) {
        return comm.Reduce(data[g].data(), count, pair.dtype, pair.op, n - 1);
      });
      for (int g = 0; g < n; ++g) {
        ASSERT_TRUE(results[g].ok()) << what << results[g];
        ASSERT_TRUE(data[g] == (g == n - 1 ? expected
                                           : testing::ReferenceInputs(
                                                 g, count, pair.dtype)))
            << what << " reduce, rank " << g;
      }
    }
    const DType dtype = DType::kFloat32;
    const size_t bytes = count * 4;
    // Broadcast from the last rank (a non-leader when local > 1).
    std::vector<std::vector<char>> data(n);
    for (int g = 0; g < n; ++g)
      data[g] = testing::ReferenceInputs(g, count, dtype);
    auto results = RunHierarchy(shape, [&](int g, Communicator& comm) {
      return comm.Broadcast(data[g].data(), count, dtype, n - 1);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(results[g].ok()) << results[g];
      ASSERT_TRUE(data[g] == testing::ReferenceInputs(n - 1, count, dtype));
    }
    // All-gather in global rank order.
    std::vector<std::vector<char>> gathered(n, std::vector<char>(n * bytes));
    results = RunHierarchy(shape, [&](int g, Communicator& comm) {
      const std::vector<char> mine = testing::ReferenceInputs(g, count, dtype);
      return comm.AllGather(mine.data(), gathered[g].data(), count, dtype);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(results[g].ok()) << results[g];
      for (int q = 0; q < n && bytes > 0; ++q) {
        ASSERT_EQ(std::memcmp(gathered[g].data() + q * bytes,
                              testing::ReferenceInputs(q, count, dtype).data(),
                              bytes),
                  0);
      }
    }
    // Reduce-scatter: block g of the reference.
    const std::vector<char> full =
        testing::ReferenceReduction(n, n * count, dtype, ReduceOp::kSum);
    std::vector<std::vector<char>> scattered(n, std::vector<char>(bytes));
    results = RunHierarchy(shape, [&](int g, Communicator& comm) {
      const std::vector<char> input =
          testing::ReferenceInputs(g, n * count, dtype);
      return comm.ReduceScatter(input.data(), scattered[g].data(), count, dtype,
                                ReduceOp::kSum);
    });
    for (int g = 0; g < n; ++g) {
      ASSERT_TRUE(results[g].ok()) << results[g];
      ASSERT_TRUE(testing::SameBytes(scattered[g].data(),
                                     full.data() + g * bytes, bytes));
    }
  }
  const auto barrier = RunHierarchy(
      shape, [](int, Communicator& comm) { return comm.Barrier(); });
  for (const auto& status : barrier) EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Shapes, HierarchicalTest,
                         ::testing::Values(Shape{2, 2}, Shape{3, 2},
                                           Shape{2, 3}, Shape{1, 4},
                                           Shape{4, 1}));

}  // namespace
}  // namespace cohort::collective
