#include "bench/collective_bench.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace cohort::bench {
namespace {

using collective::DType;
using collective::ReduceOp;

// Bus bandwidth factor of nccl-tests.
double BusFactor(Collective collective, int n) {
  switch (collective) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
      return static_cast<double>(n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
  }
  return 1.0;
}

// One operation of the benchmark, on buffers sized for `count` floats.
class Op {
 public:
  Op(collective::Communicator& comm, Collective collective, size_t count)
      : comm_(comm),
        collective_(collective),
        count_(count),
        data_(collective == Collective::kAllGather ? count * comm.size()
                                                   : count),
        input_(count) {}

  absl::Status Run() {
    switch (collective_) {
      case Collective::kAllReduce:
        return comm_.AllReduce(data_.data(), count_, DType::kFloat32,
                               ReduceOp::kSum);
      case Collective::kBroadcast:
        return comm_.Broadcast(data_.data(), count_, DType::kFloat32, 0);
      case Collective::kAllGather:
        return comm_.AllGather(input_.data(), data_.data(), count_,
                               DType::kFloat32);
    }
    return absl::OkStatus();
  }

  // Fills rank r's buffers with (r+1) + 0.5*(i%13), runs once, and checks
  // every element exactly.
  absl::StatusOr<bool> Check() {
    const int n = comm_.size();
    const int r = comm_.rank();
    for (size_t i = 0; i < count_; ++i) {
      input_[i] = data_[i] =
          static_cast<float>(r + 1) + 0.5f * static_cast<float>(i % 13);
    }
    absl::Status status = Run();
    if (!status.ok()) return status;
    for (size_t i = 0; i < data_.size(); ++i) {
      const size_t j = i % count_;
      const float pattern = 0.5f * static_cast<float>(j % 13);
      float expected = 0;
      switch (collective_) {
        case Collective::kAllReduce:
          expected = static_cast<float>(n * (n + 1) / 2) + n * pattern;
          break;
        case Collective::kBroadcast:
          expected = 1.0f + pattern;
          break;
        case Collective::kAllGather:
          expected = static_cast<float>(i / count_ + 1) + pattern;
          break;
      }
      if (data_[i] != expected) return false;
    }
    // Zeros keep repeated in-place sums finite without denormals.
    std::fill(data_.begin(), data_.end(), 0.0f);
    std::fill(input_.begin(), input_.end(), 0.0f);
    return true;
  }

  bool AllZero() const {
    return std::all_of(data_.begin(), data_.end(),
                       [](float x) { return x == 0.0f; });
  }

 private:
  collective::Communicator& comm_;
  const Collective collective_;
  const size_t count_;
  std::vector<float> data_;
  std::vector<float> input_;
};

// The maximum over ranks of each rank's values (an all-reduce MAX).
absl::Status MaxOverRanks(collective::Communicator& comm,
                          std::vector<double>& values) {
  return comm.AllReduce(values.data(), values.size(), DType::kFloat64,
                        ReduceOp::kMax);
}

absl::StatusOr<BenchRow> RunSize(collective::Communicator& comm,
                                 const BenchOptions& options, size_t bytes) {
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  Op op(comm, options.collective, count);
  BenchRow row;
  row.bytes = count * sizeof(float);
  absl::StatusOr<bool> checked = op.Check();
  if (!checked.ok()) return checked.status();

  // Warm-up, and the slowest rank's warm-up picks the iteration count.
  const int warmup = row.bytes <= (1 << 20) ? 20 : 3;
  const absl::Time warm_start = absl::Now();
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = op.Run(); !s.ok()) return s;
  }
  std::vector<double> per_iteration = {
      absl::ToDoubleSeconds(absl::Now() - warm_start) / warmup};
  if (absl::Status s = MaxOverRanks(comm, per_iteration); !s.ok()) return s;
  const int iterations =
      std::clamp(static_cast<int>(absl::ToDoubleSeconds(options.min_time) /
                                  per_iteration[0]),
                 options.min_iterations, options.max_iterations);

  std::vector<double> times(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const absl::Time start = absl::Now();
    if (absl::Status s = op.Run(); !s.ok()) return s;
    times[i] = absl::ToDoubleMicroseconds(absl::Now() - start);
  }
  if (absl::Status s = MaxOverRanks(comm, times); !s.ok()) return s;

  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  row.iterations = iterations;
  row.median_us = sorted[sorted.size() / 2];
  row.mean_us = std::accumulate(times.begin(), times.end(), 0.0) / times.size();
  row.min_us = sorted.front();
  row.algbw_gbps =
      static_cast<double>(row.bytes) / (row.median_us * 1e-6) / 1e9;
  row.busbw_gbps = row.algbw_gbps * BusFactor(options.collective, comm.size());
  // Correct on every rank, before and after the timed loop.
  std::vector<double> ok = {*checked && op.AllZero() ? 0.0 : 1.0};
  if (absl::Status s = MaxOverRanks(comm, ok); !s.ok()) return s;
  row.ok = ok[0] == 0.0;
  return row;
}

}  // namespace

absl::string_view CollectiveName(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kAllGather:
      return "allgather";
  }
  return "unknown";
}

absl::StatusOr<std::vector<BenchRow>> RunBenchmark(
    collective::Communicator& comm, const BenchOptions& options) {
  std::vector<BenchRow> rows;
  for (size_t bytes : options.sizes) {
    absl::StatusOr<BenchRow> row = RunSize(comm, options, bytes);
    if (!row.ok()) return row.status();
    rows.push_back(*row);
  }
  return rows;
}

}  // namespace cohort::bench
