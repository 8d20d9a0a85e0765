#include "collective/algorithmic_communicator.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/algorithms/chain_broadcast.h"
#include "collective/algorithms/direct.h"
#include "collective/algorithms/dissemination_barrier.h"
#include "collective/algorithms/one_shot.h"
#include "collective/algorithms/reduce_to_root.h"
#include "collective/algorithms/ring.h"
#include "collective/reduce.h"
#include "common/status_macros.h"

namespace cohort::collective {

namespace {

enum class AllReducePath { kOneShot, kDirect, kRing };

// Chosen from what every rank of a group sees alike (the buffer's size, the
// group's, the transport's kind), so that the ranks agree. The signature
// names the path: a rank that chose another fails naming both, no wait.
AllReducePath ChooseAllReduce(const Transport& transport, size_t bytes) {
  if (OneShotFits(transport, bytes)) return AllReducePath::kOneShot;
  if (transport.favours_exchanges() && DirectFits(transport.size(), bytes)) {
    return AllReducePath::kDirect;
  }
  return AllReducePath::kRing;
}

const char* AllReducePathName(AllReducePath path) {
  switch (path) {
    case AllReducePath::kOneShot:
      return "one-shot";
    case AllReducePath::kDirect:
      return "direct";
    case AllReducePath::kRing:
      break;
  }
  return "ring";
}

}  // namespace

AlgorithmicCommunicator::AlgorithmicCommunicator(
    std::unique_ptr<Transport> transport, CommunicatorOptions options)
    : transport_(std::move(transport)), options_(options) {}

template <typename Algorithm>
absl::Status AlgorithmicCommunicator::Run(std::string signature,
                                          Algorithm&& algorithm) {
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
  }
  OpContext ctx{.transport = transport_.get(),
                .sequence = next_sequence_++,
                .signature = std::move(signature),
                .deadline = absl::Now() + options_.timeout,
                .chunk_bytes = options_.chunk_bytes};
  absl::Status status = algorithm(ctx);
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = status;
  }
  if (!status.ok()) transport_->Abort(status);
  return status;
}

absl::Status AlgorithmicCommunicator::AllReduce(void* data, size_t count,
                                                DType dtype, ReduceOp op) {
  if (absl::Status supported = CheckSupported(dtype, op); !supported.ok()) {
    return supported;
  }
  const AllReducePath path =
      ChooseAllReduce(*transport_, count * DTypeSize(dtype));
  return Run(absl::StrCat("allreduce ", DTypeName(dtype), " ", ReduceOpName(op),
                          " ", count, " ", AllReducePathName(path)),
             [&](const OpContext& ctx) {
               char* bytes = static_cast<char*>(data);
               switch (path) {
                 case AllReducePath::kOneShot:
                   return OneShotAllReduce(ctx, bytes, count, dtype, op);
                 case AllReducePath::kDirect:
                   return DirectAllReduce(
                       ctx, bytes, Segments(count, ctx.size()), dtype, op);
                 case AllReducePath::kRing:
                   break;
               }
               return RingAllReduce(ctx, bytes, Segments(count, ctx.size()),
                                    dtype, op);
             });
}

absl::Status AlgorithmicCommunicator::Broadcast(void* data, size_t count,
                                                DType dtype, int root) {
  COHORT_RETURN_IF_ERROR(CheckRoot("broadcast", root, size()));
  return Run(
      absl::StrCat("broadcast ", DTypeName(dtype), " ", count, " root ", root),
      [&](const OpContext& ctx) {
        return ChainBroadcast(ctx, static_cast<char*>(data),
                              count * DTypeSize(dtype), root);
      });
}

absl::Status AlgorithmicCommunicator::Reduce(void* data, size_t count,
                                             DType dtype, ReduceOp op,
                                             int root) {
  COHORT_RETURN_IF_ERROR(CheckSupported(dtype, op));
  COHORT_RETURN_IF_ERROR(CheckRoot("reduce", root, size()));
  return Run(absl::StrCat("reduce ", DTypeName(dtype), " ", ReduceOpName(op),
                          " ", count, " root ", root),
             [&](const OpContext& ctx) {
               return ReduceToRoot(ctx, static_cast<char*>(data), count, dtype,
                                   op, root);
             });
}

absl::Status AlgorithmicCommunicator::AllGather(const void* input, void* output,
                                                size_t count, DType dtype) {
  return Run(
      absl::StrCat("allgather ", DTypeName(dtype), " ", count),
      [&](const OpContext& ctx) {
        const size_t bytes = count * DTypeSize(dtype);
        char* out = static_cast<char*>(output);
        if (bytes > 0) {
          std::memmove(out + static_cast<size_t>(ctx.rank()) * bytes, input,
                       bytes);
        }
        return RingAllGather(
            ctx, out,
            Segments(count * static_cast<size_t>(ctx.size()), ctx.size()),
            dtype);
      });
}

absl::Status AlgorithmicCommunicator::ReduceScatter(const void* input,
                                                    void* output, size_t count,
                                                    DType dtype, ReduceOp op) {
  if (absl::Status supported = CheckSupported(dtype, op); !supported.ok()) {
    return supported;
  }
  const size_t element = DTypeSize(dtype);
  const size_t total = count * static_cast<size_t>(size());
  // The ring reduces in place; the caller's input stays intact.
  std::vector<char> work(static_cast<const char*>(input),
                         static_cast<const char*>(input) + total * element);
  return Run(absl::StrCat("reducescatter ", DTypeName(dtype), " ",
                          ReduceOpName(op), " ", count),
             [&](const OpContext& ctx) {
               const Segments segments(total, ctx.size());
               absl::Status status =
                   RingReduceScatter(ctx, work.data(), segments, dtype, op);
               if (!status.ok()) return status;
               char* mine = work.data() + segments.offset(ctx.rank()) * element;
               if (op == ReduceOp::kMean) {
                 DivideForMean(mine, count, dtype, ctx.size());
               }
               if (count > 0) std::memcpy(output, mine, count * element);
               return absl::OkStatus();
             });
}

absl::Status AlgorithmicCommunicator::Barrier() {
  return Run("barrier",
             [](const OpContext& ctx) { return DisseminationBarrier(ctx); });
}

std::string AlgorithmicCommunicator::Route(std::string_view op,
                                           size_t bytes) const {
  const int n = size();
  if (n <= 1) return "none";
  const std::string everyone = absl::StrCat("all ", n, " ranks");
  const int r = rank();
  const std::string ring = absl::StrCat("ring: ranks ", (r + n - 1) % n, " -> ",
                                        r, " -> ", (r + 1) % n);
  if (op == "allreduce") {
    const AllReducePath path = ChooseAllReduce(*transport_, bytes);
    return path == AllReducePath::kRing
               ? ring
               : absl::StrCat(AllReducePathName(path), ": ", everyone);
  }
  if (op == "allgather" || op == "reduce_scatter") return ring;
  if (op == "broadcast") return "chain: from the root, round the ring";
  if (op == "reduce") return absl::StrCat("to the root: ", everyone);
  if (op == "barrier") return absl::StrCat("dissemination: ", everyone);
  return {};
}

void AlgorithmicCommunicator::Abort(const absl::Status& status) {
  const absl::Status reason = AbortStatus(status);
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = reason;
  }
  transport_->Abort(reason);
}

}  // namespace cohort::collective
