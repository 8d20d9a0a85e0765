#include "collective/metered_communicator.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics.h"
#include "common/trace.h"

namespace cohort::collective {
namespace {

constexpr char kDuration[] = "cohort_collective_duration_seconds";
constexpr char kSize[] = "cohort_collective_size_bytes";

}  // namespace

MeteredCommunicator::MeteredCommunicator(std::unique_ptr<Communicator> inner,
                                         std::string algorithm)
    : inner_(std::move(inner)), algorithm_(std::move(algorithm)) {
  MetricRegistry& registry = MetricRegistry::Default();
  registry.DeclareHistogram(kDuration,
                            "Time of a collective operation on one rank.",
                            LatencyBuckets());
  registry.DeclareHistogram(
      kSize, "Bytes of a collective operation's input on one rank.",
      SizeBuckets());
}

template <typename Op>
absl::Status MeteredCommunicator::Timed(const char* name, size_t bytes,
                                        Op&& op) {
  // Every rank runs the same collectives in the same order, so `seq`
  // matches an operation across ranks (to find who waited on whom).
  const int64_t seq = ops_++;
  ScopedSpan span(name);
  if (span.active()) {
    span.Arg("bytes", absl::StrCat(bytes));
    span.Arg("algorithm", algorithm_);
    if (std::string route = inner_->Route(name, bytes); !route.empty()) {
      span.Arg("route", std::move(route));
    }
    span.Arg("seq", absl::StrCat(seq));
  }
  const absl::Time start = absl::Now();
  absl::Status status = op();
  // Failed operations are not timed: their time is the deadline's, not the
  // network's.
  if (status.ok()) {
    const MetricLabels labels = {{"op", name}, {"algorithm", algorithm_}};
    MetricRegistry& registry = MetricRegistry::Default();
    registry.Observe(kDuration, labels,
                     absl::ToDoubleSeconds(absl::Now() - start));
    registry.Observe(kSize, labels, static_cast<double>(bytes));
  }
  return status;
}

absl::Status MeteredCommunicator::AllReduce(void* data, size_t count,
                                            DType dtype, ReduceOp op) {
  return Timed("allreduce", count * DTypeSize(dtype),
               [&] { return inner_->AllReduce(data, count, dtype, op); });
}

absl::Status MeteredCommunicator::Reduce(void* data, size_t count, DType dtype,
                                         ReduceOp op, int root) {
  return Timed("reduce", count * DTypeSize(dtype),
               [&] { return inner_->Reduce(data, count, dtype, op, root); });
}

absl::Status MeteredCommunicator::Broadcast(void* data, size_t count,
                                            DType dtype, int root) {
  return Timed("broadcast", count * DTypeSize(dtype),
               [&] { return inner_->Broadcast(data, count, dtype, root); });
}

absl::Status MeteredCommunicator::AllGather(const void* input, void* output,
                                            size_t count, DType dtype) {
  return Timed("allgather", count * DTypeSize(dtype),
               [&] { return inner_->AllGather(input, output, count, dtype); });
}

absl::Status MeteredCommunicator::ReduceScatter(const void* input, void* output,
                                                size_t count, DType dtype,
                                                ReduceOp op) {
  return Timed("reduce_scatter", count * size() * DTypeSize(dtype), [&] {
    return inner_->ReduceScatter(input, output, count, dtype, op);
  });
}

absl::Status MeteredCommunicator::Barrier() {
  return Timed("barrier", 0, [&] { return inner_->Barrier(); });
}

}  // namespace cohort::collective
