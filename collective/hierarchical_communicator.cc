#include "collective/hierarchical_communicator.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/reduce.h"
#include "common/status_macros.h"

namespace cohort::collective {

HierarchicalCommunicator::HierarchicalCommunicator(
    std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> cross,
    int num_nodes, int node, LocalReduction local_reduction)
    : local_(std::move(local)),
      cross_(std::move(cross)),
      num_nodes_(num_nodes),
      node_(node),
      local_reduction_(local_reduction) {}

template <typename Fn>
absl::Status HierarchicalCommunicator::Run(Fn fn) {
  absl::Status status = fn();
  if (!status.ok()) Abort(status);
  return status;
}

int HierarchicalCommunicator::rank() const {
  return node_ * local_->size() + local_->rank();
}

int HierarchicalCommunicator::size() const {
  return num_nodes_ * local_->size();
}

absl::Status HierarchicalCommunicator::AllReduce(void* data, size_t count,
                                                 DType dtype, ReduceOp op) {
  COHORT_RETURN_IF_ERROR(CheckSupported(dtype, op));
  // MEAN is summed at both levels and divided once, by the whole group, so
  // that every rank ends with the same bits.
  const ReduceOp level_op = op == ReduceOp::kMean ? ReduceOp::kSum : op;
  return Run([&]() -> absl::Status {
    // Only the leader needs the node's sum; it hands the result back below.
    COHORT_RETURN_IF_ERROR(
        local_reduction_ == LocalReduction::kToLeader
            ? local_->Reduce(data, count, dtype, level_op, 0)
            : local_->AllReduce(data, count, dtype, level_op));
    if (leader()) {
      COHORT_RETURN_IF_ERROR(cross_->AllReduce(data, count, dtype, level_op));
    }
    if (op == ReduceOp::kMean && local_->rank() == 0) {
      DivideForMean(data, count, dtype, size());
    }
    return local_->Broadcast(data, count, dtype, 0);
  });
}

absl::Status HierarchicalCommunicator::Reduce(void* data, size_t count,
                                              DType dtype, ReduceOp op,
                                              int root) {
  COHORT_RETURN_IF_ERROR(CheckRoot("reduce", root, size()));
  if (rank() == root) return AllReduce(data, count, dtype, op);
  // The others' buffers stay as they were: they reduce a copy.
  const char* bytes = static_cast<const char*>(data);
  std::vector<char> copy(bytes, bytes + count * DTypeSize(dtype));
  return AllReduce(copy.data(), count, dtype, op);
}

absl::Status HierarchicalCommunicator::Broadcast(void* data, size_t count,
                                                 DType dtype, int root) {
  COHORT_RETURN_IF_ERROR(CheckRoot("broadcast", root, size()));
  const int root_node = root / local_->size();
  return Run([&]() -> absl::Status {
    // On the root's node the data first reaches the leader.
    if (node_ == root_node) {
      COHORT_RETURN_IF_ERROR(
          local_->Broadcast(data, count, dtype, root % local_->size()));
    }
    if (leader()) {
      COHORT_RETURN_IF_ERROR(cross_->Broadcast(data, count, dtype, root_node));
    }
    if (node_ != root_node) {
      COHORT_RETURN_IF_ERROR(local_->Broadcast(data, count, dtype, 0));
    }
    return absl::OkStatus();
  });
}

absl::Status HierarchicalCommunicator::AllGather(const void* input,
                                                 void* output, size_t count,
                                                 DType dtype) {
  const size_t node_bytes = count * DTypeSize(dtype) * local_->size();
  char* out = static_cast<char*>(output);
  // This node's block lands at its place in the global order.
  char* node_block = out + node_bytes * node_;
  return Run([&]() -> absl::Status {
    COHORT_RETURN_IF_ERROR(local_->AllGather(input, node_block, count, dtype));
    if (leader()) {
      COHORT_RETURN_IF_ERROR(
          cross_->AllGather(node_block, out, count * local_->size(), dtype));
    }
    return local_->Broadcast(out, count * size(), dtype, 0);
  });
}

absl::Status HierarchicalCommunicator::ReduceScatter(const void* input,
                                                     void* output, size_t count,
                                                     DType dtype, ReduceOp op) {
  // A full all-reduce, then this rank's block: twice the data of a direct
  // reduce-scatter, but the same two-level path and the same bits.
  const size_t element = DTypeSize(dtype);
  std::vector<char> work(
      static_cast<const char*>(input),
      static_cast<const char*>(input) + count * size() * element);
  COHORT_RETURN_IF_ERROR(AllReduce(work.data(), count * size(), dtype, op));
  if (count > 0) {
    std::memcpy(output,
                work.data() + static_cast<size_t>(rank()) * count * element,
                count * element);
  }
  return absl::OkStatus();
}

absl::Status HierarchicalCommunicator::Barrier() {
  return Run([&]() -> absl::Status {
    COHORT_RETURN_IF_ERROR(local_->Barrier());
    if (leader()) COHORT_RETURN_IF_ERROR(cross_->Barrier());
    return local_->Barrier();
  });
}

void HierarchicalCommunicator::Abort(const absl::Status& status) {
  local_->Abort(status);
  if (leader()) cross_->Abort(status);
}

std::string HierarchicalCommunicator::Route(std::string_view op,
                                            size_t bytes) const {
  std::string route = absl::StrCat("local ", local_->Route(op, bytes));
  if (leader()) absl::StrAppend(&route, "; agents ", cross_->Route(op, bytes));
  return route;
}

}  // namespace cohort::collective
