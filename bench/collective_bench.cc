#include "bench/collective_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::bench {
namespace {

using collective::DType;
using collective::ReduceOp;

// The bytes one operation delivers to each rank, as nccl-tests counts them
// for algbw: an all-gather's whole output, the others' buffer.
double AlgorithmBytes(Collective collective, size_t bytes_per_rank, int n) {
  const double bytes = static_cast<double>(bytes_per_rank);
  return collective == Collective::kAllGather ? bytes * n : bytes;
}

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

// A monotonic clock: the wall clock may be stepped during a run.
double MicrosecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// The median, as the peers compute it: the mean of the middle two of an
// even count.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid]
                                : (values[mid - 1] + values[mid]) / 2;
}

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
  const auto warm_start = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = op.Run(); !s.ok()) return s;
  }
  std::vector<double> per_iteration = {MicrosecondsSince(warm_start) * 1e-6 /
                                       warmup};
  if (absl::Status s = MaxOverRanks(comm, per_iteration); !s.ok()) return s;
  const int iterations =
      std::clamp(static_cast<int>(absl::ToDoubleSeconds(options.min_time) /
                                  per_iteration[0]),
                 options.min_iterations, options.max_iterations);

  // Each iteration's time is the slowest rank's; the mean is rank 0's loop
  // time per iteration, as the peers report it.
  std::vector<double> times(static_cast<size_t>(iterations));
  const auto loop_start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = op.Run(); !s.ok()) return s;
    times[i] = MicrosecondsSince(start);
  }
  row.mean_us = MicrosecondsSince(loop_start) / iterations;
  if (absl::Status s = MaxOverRanks(comm, times); !s.ok()) return s;

  row.iterations = iterations;
  row.median_us = Median(times);
  row.min_us = *std::min_element(times.begin(), times.end());
  row.algbw_gbps = AlgorithmBytes(options.collective, row.bytes, comm.size()) /
                   (row.median_us * 1e-6) / 1e9;
  row.busbw_gbps = row.algbw_gbps * BusFactor(options.collective, comm.size());
  // Correct on every rank: the timed loop kept its zeros, and the path gives
  // exact values after it as before.
  const bool zeros = op.AllZero();
  absl::StatusOr<bool> checked_after = op.Check();
  if (!checked_after.ok()) return checked_after.status();
  std::vector<double> ok = {*checked && zeros && *checked_after ? 0.0 : 1.0};
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
