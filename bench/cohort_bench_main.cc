// cohort-bench: nccl-tests-style benchmarks of Cohort's collectives.
//
//   cohort-bench allreduce --ranks=4 --sizes=4K,1M,16M,64M
//
// Starts --ranks rank processes on loopback (this binary again, with
// --rank), which meet through a store this process serves, and prints rank
// 0's results: a table, or --format=csv lines for the peer baselines.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/collective_bench.h"
#include "bench/sizes.h"
#include "collective/algorithmic_communicator.h"
#include "collective/grpc_store.h"
#include "collective/transports/grpc_transport.h"
#include "common/allocator.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "common/signals.h"
#include "common/subprocess.h"
#include "coordinator/store_manager.h"
#include "coordinator/store_service.h"
#include "rpc/server.h"

ABSL_FLAG(int, ranks, 2, "Rank processes to start on loopback.");
ABSL_FLAG(std::string, sizes, "4K,64K,1M,16M,64M",
          "Bytes per rank, comma-separated; K, M, G are powers of 1024.");
ABSL_FLAG(std::string, format, "table",
          "table, or csv (the peers' RESULT lines; allreduce only).");
ABSL_FLAG(std::string, label, "cohort", "csv: the label column.");
ABSL_FLAG(absl::Duration, min_time, absl::Milliseconds(1500),
          "Length of each timed loop.");
ABSL_FLAG(std::string, store, "",
          "Join this store (HOST:PORT) instead of starting one; with --rank.");
ABSL_FLAG(int, rank, -1,
          "Run only this rank of a group of --ranks, joining --store: to put "
          "ranks on other hosts.");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "With --rank: where this rank's Peer server listens (HOST:PORT; "
          "peers dial it). With the store command: where the store serves.");
ABSL_FLAG(std::string, group, "bench", "Internal: the group name.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(120), "Per collective.");
ABSL_FLAG(int64_t, chunk_bytes, 1 << 20,
          "Pipelining unit of large transfers; the transport raises it to "
          "its smallest (4 KiB over gRPC) and the window caps it (2 MiB).");
ABSL_FLAG(bool, shared_memory, true,
          "Ring neighbours on one host exchange data through shared memory; "
          "false sends every byte over gRPC.");

namespace cohort::bench {
namespace {

constexpr char kUsage[] =
    "nccl-tests-style benchmarks of Cohort's collectives.\n"
    "\n"
    "  cohort-bench allreduce --ranks=2 --sizes=4K,1M,16M,64M\n"
    "  cohort-bench allgather --ranks=4\n"
    "\n"
    "Ranks on given hosts: serve a store, then start each rank where it "
    "should run:\n"
    "  cohort-bench store --listen=10.0.0.1:7000\n"
    "  cohort-bench allreduce --store=10.0.0.1:7000 --ranks=2 --rank=0 "
    "--listen=10.0.0.2:0\n"
    "  cohort-bench allreduce --store=10.0.0.1:7000 --ranks=2 --rank=1 "
    "--listen=10.0.0.3:0\n"
    "Rank 0 prints the results.\n"
    "\n"
    "Collectives: allreduce (float32 sum, in place), broadcast (from rank 0),\n"
    "allgather.";

absl::StatusOr<Collective> ParseCollective(const std::string& name) {
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast,
                       Collective::kAllGather}) {
    if (name == CollectiveName(c)) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown collective \"", name, "\" (allreduce, broadcast or allgather)"));
}

void Print(const std::vector<BenchRow>& rows, Collective collective,
           int ranks) {
  if (absl::GetFlag(FLAGS_format) == "csv") {
    for (const BenchRow& row : rows) {
      std::cout << absl::StrFormat(
          "RESULT,%s,%d,%d,%d,%.2f,%.2f,%.2f,%.4f,%.4f,%s\n",
          absl::GetFlag(FLAGS_label), ranks, row.bytes, row.iterations,
          row.median_us, row.mean_us, row.min_us, row.algbw_gbps,
          row.busbw_gbps, row.ok ? "OK" : "FAIL");
    }
    return;
  }
  std::cout << absl::StrFormat(
      "# cohort-bench %s: %d ranks on loopback (%s), float32%s\n",
      CollectiveName(collective), ranks,
      absl::GetFlag(FLAGS_shared_memory)
          ? "data through shared memory between ring neighbours"
          : "gRPC only",
      collective == Collective::kAllReduce ? " sum" : "");
  std::cout << absl::StrFormat("%10s %12s %7s %6s %12s %10s %10s %6s %6s\n",
                               "size", "count", "type", "redop", "time(us)",
                               "algbw", "busbw", "iters", "check");
  for (const BenchRow& row : rows) {
    std::cout << absl::StrFormat(
        "%10s %12d %7s %6s %12.1f %10.3f %10.3f %6d %6s\n", SizeName(row.bytes),
        row.bytes / 4, "float",
        collective == Collective::kAllReduce ? "sum" : "-", row.median_us,
        row.algbw_gbps, row.busbw_gbps, row.iterations, row.ok ? "OK" : "FAIL");
  }
  std::cout << "# algbw, busbw in GB/s (1e9 B/s); time is the median over "
               "iterations of the slowest rank\n";
}

// Rank mode: join the group, run, and (rank 0) print.
int RunRank(Collective collective, const std::vector<size_t>& sizes) {
  const int rank = absl::GetFlag(FLAGS_rank);
  const int ranks = absl::GetFlag(FLAGS_ranks);
  collective::GrpcStore store(absl::GetFlag(FLAGS_store), rpc::Security{});
  absl::StatusOr<std::unique_ptr<collective::GrpcTransport>> transport =
      collective::GrpcTransport::Create(
          {.group = absl::GetFlag(FLAGS_group),
           .rank = rank,
           .size = ranks,
           .listen = absl::GetFlag(FLAGS_listen),
           .connect_timeout = absl::Seconds(60),
           .shared_memory = absl::GetFlag(FLAGS_shared_memory)},
          store);
  if (!transport.ok()) {
    std::cerr << "cohort-bench rank " << rank << ": " << transport.status()
              << "\n";
    return 1;
  }
  collective::AlgorithmicCommunicator comm(
      *std::move(transport),
      {.timeout = absl::GetFlag(FLAGS_timeout),
       .chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_bytes))});
  absl::StatusOr<std::vector<BenchRow>> rows =
      RunBenchmark(comm, {.collective = collective,
                          .sizes = sizes,
                          .min_time = absl::GetFlag(FLAGS_min_time)});
  if (!rows.ok()) {
    std::cerr << "cohort-bench rank " << rank << ": " << rows.status() << "\n";
    return 1;
  }
  if (rank == 0) Print(*rows, collective, ranks);
  const bool all_ok = std::all_of(rows->begin(), rows->end(),
                                  [](const BenchRow& row) { return row.ok; });
  return all_ok ? 0 : 1;
}

// Store mode: serve a rendezvous store until SIGTERM or SIGINT.
int ServeStore() {
  coordinator::StoreManager store;
  store.Start();
  rpc::Authenticator no_auth(std::nullopt);
  coordinator::StoreService service(&store, &no_auth);
  rpc::RpcServer server({.listen = absl::GetFlag(FLAGS_listen)});
  server.AddService(&service);
  if (absl::Status started = server.Start(); !started.ok()) {
    std::cerr << "cohort-bench: " << started << "\n";
    return 1;
  }
  std::cout << "cohort-bench: store serving on " << server.address()
            << std::endl;
  TerminationWaiter waiter;
  waiter.Wait();
  store.Shutdown();
  server.Shutdown();
  return 0;
}

// Launcher mode: serve a store, start the ranks, wait for them.
int Launch(const std::string& command) {
  coordinator::StoreManager store;
  store.Start();
  rpc::Authenticator no_auth(std::nullopt);
  coordinator::StoreService service(&store, &no_auth);
  rpc::RpcServer server({.listen = "127.0.0.1:0"});
  server.AddService(&service);
  if (absl::Status started = server.Start(); !started.ok()) {
    std::cerr << "cohort-bench: " << started << "\n";
    return 1;
  }
  const int ranks = absl::GetFlag(FLAGS_ranks);
  std::vector<Subprocess> children;
  for (int r = 0; r < ranks; ++r) {
    SpawnOptions spawn;
    spawn.argv = {
        ExecutableDirectory() + "/cohort-bench",
        command,
        absl::StrCat("--rank=", r),
        absl::StrCat("--ranks=", ranks),
        absl::StrCat("--store=", server.address()),
        absl::StrCat("--sizes=", absl::GetFlag(FLAGS_sizes)),
        absl::StrCat("--format=", absl::GetFlag(FLAGS_format)),
        absl::StrCat("--label=", absl::GetFlag(FLAGS_label)),
        absl::StrCat("--min_time=",
                     absl::FormatDuration(absl::GetFlag(FLAGS_min_time))),
        absl::StrCat("--timeout=",
                     absl::FormatDuration(absl::GetFlag(FLAGS_timeout))),
        absl::StrCat("--chunk_bytes=", absl::GetFlag(FLAGS_chunk_bytes)),
        absl::StrCat("--shared_memory=",
                     absl::GetFlag(FLAGS_shared_memory) ? "true" : "false")};
    absl::StatusOr<Subprocess> child = Subprocess::Spawn(spawn);
    if (!child.ok()) {
      std::cerr << "cohort-bench: " << child.status() << "\n";
      for (Subprocess& started : children) started.Stop(absl::Seconds(2));
      return 1;
    }
    children.push_back(*std::move(child));
  }
  // Every rank ends on its own (each collective has a deadline); the one
  // deadline here covers a rank that never joins.
  int failures = 0;
  const absl::Time deadline =
      absl::Now() + absl::GetFlag(FLAGS_timeout) * 2 + absl::Minutes(10);
  for (int r = 0; r < ranks; ++r) {
    std::optional<ExitStatus> exit = children[r].Wait(
        std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!exit.has_value()) {
      std::cerr << "cohort-bench: rank " << r
                << " did not finish; stopping it\n";
      children[r].Stop(absl::Seconds(2));
      ++failures;
    } else if (!exit->exited() || exit->exit_code() != 0) {
      std::cerr << "cohort-bench: rank " << r << " " << exit->ToString()
                << "\n";
      ++failures;
    }
  }
  store.Shutdown();
  server.Shutdown();
  return failures == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  KeepLargeAllocationsInTheHeap();
  const std::vector<std::string> args = ParseCommandLine(argc, argv, kUsage);
  if (args.size() == 1 && args[0] == "store") {
    BlockTerminationSignals();  // before any thread, so TerminationWaiter sees them
    return ServeStore();
  }
  if (args.size() != 1) {
    ExitWithConfigError(absl::InvalidArgumentError(
        "give one collective: allreduce, broadcast or allgather (see --help)"));
  }
  absl::StatusOr<Collective> collective = ParseCollective(args[0]);
  if (!collective.ok()) ExitWithConfigError(collective.status());
  absl::StatusOr<std::vector<size_t>> sizes =
      ParseSizes(absl::GetFlag(FLAGS_sizes));
  if (!sizes.ok()) ExitWithConfigError(sizes.status());
  if (absl::GetFlag(FLAGS_ranks) < 1) {
    ExitWithConfigError(
        absl::InvalidArgumentError("--ranks must be at least 1"));
  }
  if (absl::GetFlag(FLAGS_chunk_bytes) < 1) {
    ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrCat("--chunk_bytes must be at least 1, got ",
                     absl::GetFlag(FLAGS_chunk_bytes))));
  }
  if (absl::GetFlag(FLAGS_min_time) < absl::ZeroDuration()) {
    ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrCat("--min_time must not be negative, got ",
                     absl::FormatDuration(absl::GetFlag(FLAGS_min_time)))));
  }
  absl::StatusOr<bool> csv = ParseCsvFormat(absl::GetFlag(FLAGS_format));
  if (!csv.ok()) ExitWithConfigError(csv.status());
  // The peers' RESULT lines carry no collective, and their tools read every
  // line as an all-reduce.
  if (*csv && *collective != Collective::kAllReduce) {
    ExitWithConfigError(absl::InvalidArgumentError(
        absl::StrCat("--format=csv writes the peers' all-reduce RESULT lines; ",
                     CollectiveName(*collective), " has only the table")));
  }
  if (const int rank = absl::GetFlag(FLAGS_rank); rank >= 0) {
    if (rank >= absl::GetFlag(FLAGS_ranks)) {
      ExitWithConfigError(absl::InvalidArgumentError(
          absl::StrCat("--rank=", rank, " is out of range for --ranks=",
                       absl::GetFlag(FLAGS_ranks))));
    }
    if (absl::GetFlag(FLAGS_store).empty()) {
      ExitWithConfigError(absl::InvalidArgumentError(
          "--rank needs --store=HOST:PORT: the store its group meets at "
          "(`cohort-bench store` serves one)"));
    }
    return RunRank(*collective, *sizes);
  }
  return Launch(args[0]);
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) { return cohort::bench::Main(argc, argv); }
