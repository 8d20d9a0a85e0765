#pragma once

// Two-level collectives for ranks grouped in nodes (agents): reduce inside
// the node, run the cross-node collective among one leader per node, then
// broadcast inside the node. The cheap local links carry most of the
// traffic and the expensive ones carry one copy per node, not per rank.
//
// Global rank = node * local_size + local_rank, with the same local_size on
// every node; the leader of a node is its local rank 0.
//
// The reduction inside the node is one of TF's intra-node CrossDeviceOps:
// every rank all-reduces with its node's ranks (HierarchicalCopyAllReduce),
// or sends its buffer to the leader, which adds them up
// (ReductionToOneDevice).

#include <memory>

#include "collective/communicator.h"

namespace cohort::collective {

enum class LocalReduction { kAllReduce, kToLeader };

// Owns both communicators. Operations from one thread at a time (per rank);
// Abort from any.
class HierarchicalCommunicator final : public Communicator {
 public:
  // `local` spans this node's ranks; `cross` spans the nodes' leaders and is
  // null on ranks that are not their node's leader, and on every rank of a
  // group of one node.
  HierarchicalCommunicator(
      std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> cross,
      int num_nodes, int node,
      LocalReduction local_reduction = LocalReduction::kAllReduce);

  int rank() const override;
  int size() const override;

  absl::Status AllReduce(void* data, size_t count, DType dtype,
                         ReduceOp op) override;
  absl::Status Broadcast(void* data, size_t count, DType dtype,
                         int root) override;
  absl::Status Reduce(void* data, size_t count, DType dtype, ReduceOp op,
                      int root) override;
  absl::Status AllGather(const void* input, void* output, size_t count,
                         DType dtype) override;
  absl::Status ReduceScatter(const void* input, void* output, size_t count,
                             DType dtype, ReduceOp op) override;
  absl::Status Barrier() override;
  void Abort(const absl::Status& status) override;
  // "local <route>", and on a node's leader "; agents <route>".
  std::string Route(std::string_view op, size_t bytes) const override;

 private:
  bool leader() const { return cross_ != nullptr; }
  // Runs one operation; a failure at either level aborts both, so that no
  // rank of either group waits for this one.
  template <typename Fn>
  absl::Status Run(Fn fn);

  const std::unique_ptr<Communicator> local_;
  const std::unique_ptr<Communicator> cross_;
  const int num_nodes_;
  const int node_;
  const LocalReduction local_reduction_;
};

}  // namespace cohort::collective
