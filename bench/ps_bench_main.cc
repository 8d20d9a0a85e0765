// cohort-ps-bench: parameter-server throughput, against a bare gRPC echo of
// the same bytes.
//
//   cohort-ps-bench --sizes=1K,256K,16M --workers=1,2,4 --ps=1
//
// Serves in this process, on 127.0.0.1, --ps parameter-server shards (the
// VariableStore and PsService that cohort-ps runs, without snapshots) and an
// Echo service. For each size and worker count it runs two loops of the
// same shape, each worker a thread:
//
//   ps    every worker has its own PsClient; one update is a Pull of one
//         float32 variable of that size plus a Push of a gradient of the
//         same size, which the shard applies with SGD. With --ps > 1 the
//         variable is split over the shards (FixedShardsPartitioner(--ps)),
//         so each update is one pull and one push stream per shard.
//   echo  every worker has its own channel; one echo is a unary call
//         carrying the bytes to the server and back: the same bytes over
//         the same transport as one update, with nothing else.
//
// Each loop runs --min_time (at most --max_updates per worker) after
// --warmup updates. MB/s counts both directions (2 x size per update),
// MB = 10^6 bytes. Every push is checked to have been applied.

#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "bench/echo.grpc.pb.h"
#include "bench/sizes.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "ps_server/in_process_ps.h"
#include "ps_client/partitioner.h"
#include "ps_client/ps_client.h"
#include "rpc/channel.h"
#include "rpc/server.h"

ABSL_FLAG(std::string, sizes, "1K,256K,16M",
          "Variable sizes in bytes (float32), comma-separated; K, M, G are "
          "powers of 1024.");
ABSL_FLAG(std::string, workers, "1,2,4",
          "Concurrent workers, comma-separated; each is a thread with its own "
          "client.");
ABSL_FLAG(int, ps, 1, "Parameter-server shards to serve and split over.");
ABSL_FLAG(absl::Duration, min_time, absl::Seconds(2),
          "Length of each timed loop.");
ABSL_FLAG(int64_t, max_updates, 100000,
          "Most updates (or echoes) per worker in one timed loop.");
ABSL_FLAG(int, warmup, 3, "Untimed updates per worker before each loop.");
ABSL_FLAG(std::string, format, "table", "table, or csv.");

namespace cohort::bench {
namespace {

constexpr char kUsage[] =
    "parameter-server pull+push throughput against a bare gRPC echo of the "
    "same bytes, on loopback, in one process.\n"
    "\n"
    "  cohort-ps-bench --sizes=1K,256K,16M --workers=1,2,4 --ps=1\n"
    "\n"
    "One update = one pull + one push of a float32 variable; one echo = one\n"
    "unary call carrying the same bytes there and back. Prints updates/s,\n"
    "MB/s (both directions) and the ratio ps/echo. Progress goes to stderr.";

// ---------------------------------------------------------------------------
// The echo service.

class EchoService final : public Echo::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const EchoMessage* request,
                                 EchoMessage* response) override {
    response->set_payload(request->payload());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// ---------------------------------------------------------------------------
// The timed loop.

struct Measured {
  int64_t count = 0;  // updates or echoes, all workers
  absl::Duration elapsed;
  double per_second() const { return count / absl::ToDoubleSeconds(elapsed); }
};

// One worker's loop: `setup` runs first (connect, warm up), then, once every
// worker is set up, `step` runs until the time or count bound.
struct WorkerFns {
  std::function<absl::Status()> setup;
  std::function<absl::Status()> step;
};

absl::StatusOr<Measured> TimeWorkers(std::vector<WorkerFns> workers) {
  const int n = static_cast<int>(workers.size());
  const absl::Duration min_time = absl::GetFlag(FLAGS_min_time);
  const int64_t max_count = absl::GetFlag(FLAGS_max_updates);
  absl::BlockingCounter ready(n);
  absl::Notification go;
  absl::Time start;
  std::vector<absl::Status> results(n);
  std::vector<int64_t> counts(n, 0);
  std::vector<absl::Time> ends(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      results[i] = workers[i].setup();
      ready.DecrementCount();
      go.WaitForNotification();
      if (!results[i].ok()) return;
      const absl::Time stop = start + min_time;
      while (counts[i] < max_count && absl::Now() < stop) {
        results[i] = workers[i].step();
        if (!results[i].ok()) return;
        ++counts[i];
      }
      ends[i] = absl::Now();
    });
  }
  ready.Wait();
  start = absl::Now();
  go.Notify();
  for (std::thread& t : threads) t.join();
  Measured m;
  absl::Time last = start;
  for (int i = 0; i < n; ++i) {
    if (!results[i].ok()) {
      return absl::Status(
          results[i].code(),
          absl::StrCat("worker ", i, ": ", results[i].message()));
    }
    m.count += counts[i];
    last = std::max(last, ends[i]);
  }
  m.elapsed = last - start;
  return m;
}

// ---------------------------------------------------------------------------
// The two loops.

struct Servers {
  std::vector<std::unique_ptr<ps::InProcessPs>> shards;
  std::vector<std::string> ps_addresses;
  EchoService echo;
  std::unique_ptr<rpc::RpcServer> echo_server;
};

absl::Span<const char> Bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

int64_t ShardUpdates(const Servers& servers) {
  int64_t total = 0;
  for (const auto& shard : servers.shards) {
    total += shard->service().ShardState().updates();
  }
  return total;
}

absl::StatusOr<Measured> RunPs(Servers& servers, size_t bytes, int workers,
                               int64_t job_sequence) {
  const int num_ps = static_cast<int>(servers.shards.size());
  const int64_t elements = static_cast<int64_t>(bytes / sizeof(float));
  absl::StatusOr<ps::Placement> placement = ps::PlaceVariables(
      {{"v", {elements}, 4}}, num_ps,
      {.policy = num_ps > 1 ? ps::PartitionPolicy::kFixedShards
                            : ps::PartitionPolicy::kNone,
       .num_shards = num_ps});
  if (!placement.ok()) return placement.status();
  const int64_t parts = placement->variables[0].parts.size();
  v1::PsOptimizer sgd;
  sgd.set_kind(v1::PsOptimizer::SGD);
  sgd.set_learning_rate(0.01);

  const int warmup = absl::GetFlag(FLAGS_warmup);
  std::vector<std::unique_ptr<ps::PsClient>> clients(workers);
  std::vector<std::vector<float>> values(workers), grads(workers);
  std::vector<WorkerFns> fns;
  for (int i = 0; i < workers; ++i) {
    auto pull_push = [&, i]() -> absl::Status {
      const ps::PullBuffer pull[] = {
          {"v", {reinterpret_cast<char*>(values[i].data()), bytes}}};
      COHORT_RETURN_IF_ERROR(clients[i]->Pull(pull));
      const ps::PushBuffer push[] = {{"v", Bytes(grads[i])}};
      return clients[i]->Push(push);
    };
    fns.push_back({.setup = [&, i, pull_push]() -> absl::Status {
                     values[i].assign(elements, 0.0f);
                     grads[i].assign(elements, 1e-3f);
                     COHORT_ASSIGN_OR_RETURN(
                         clients[i],
                         ps::PsClient::Create(
                             {.ps_addresses = servers.ps_addresses,
                              .job_id = absl::StrCat("bench-", job_sequence),
                              .job_sequence = job_sequence,
                              .worker = absl::StrCat("worker:", i),
                              .rpc_timeout = absl::Seconds(60)}));
                     COHORT_RETURN_IF_ERROR(clients[i]->CreateVariables(
                         *placement, {{.optimizer = sgd}}));
                     for (int w = 0; w < warmup; ++w) {
                       COHORT_RETURN_IF_ERROR(pull_push());
                     }
                     return absl::OkStatus();
                   },
                   .step = pull_push});
  }
  const int64_t updates_before = ShardUpdates(servers);
  COHORT_ASSIGN_OR_RETURN(Measured m, TimeWorkers(std::move(fns)));
  // Every push of every part was applied, warm-up included. (The counter
  // survives the job change: it counts over the shard's life.)
  const int64_t applied = ShardUpdates(servers) - updates_before;
  const int64_t expected = (m.count + int64_t{warmup} * workers) * parts;
  if (applied != expected) {
    return absl::InternalError(absl::StrCat(
        "the shards applied ", applied, " pushed parts, expected ", expected));
  }
  return m;
}

absl::StatusOr<Measured> RunEcho(Servers& servers, size_t bytes, int workers) {
  const std::string address = servers.echo_server->DialAddress();
  const int warmup = absl::GetFlag(FLAGS_warmup);
  struct Worker {
    std::unique_ptr<rpc::Connection> connection;
    std::unique_ptr<Echo::Stub> stub;
    EchoMessage request, response;
  };
  std::vector<Worker> state(workers);
  std::vector<WorkerFns> fns;
  for (int i = 0; i < workers; ++i) {
    auto echo = [&, i]() -> absl::Status {
      Worker& w = state[i];
      auto context = w.connection->NewContext(absl::Seconds(60));
      COHORT_RETURN_IF_ERROR(w.connection->Annotate(
          "Echo.Echo", w.stub->Echo(context.get(), w.request, &w.response)));
      if (w.response.payload().size() != bytes) {
        return absl::InternalError("echo returned another size");
      }
      return absl::OkStatus();
    };
    fns.push_back({.setup = [&, i, echo]() -> absl::Status {
                     Worker& w = state[i];
                     w.connection = std::make_unique<rpc::Connection>(
                         address, rpc::Security{});
                     w.stub = Echo::NewStub(w.connection->channel());
                     w.request.set_payload(std::string(bytes, '\x5a'));
                     for (int k = 0; k < warmup; ++k) {
                       COHORT_RETURN_IF_ERROR(echo());
                     }
                     return absl::OkStatus();
                   },
                   .step = echo});
  }
  return TimeWorkers(std::move(fns));
}

// ---------------------------------------------------------------------------

absl::StatusOr<std::vector<int>> ParseCounts(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workers: \"", part, "\" is not a positive count"));
    }
    out.push_back(value);
  }
  if (out.empty()) return absl::InvalidArgumentError("--workers is empty");
  return out;
}

absl::Status StartServers(int num_ps, Servers* servers) {
  for (int i = 0; i < num_ps; ++i) {
    COHORT_ASSIGN_OR_RETURN(std::unique_ptr<ps::InProcessPs> shard,
                            ps::InProcessPs::Start({.shard_id = i}));
    servers->ps_addresses.push_back(shard->address());
    servers->shards.push_back(std::move(shard));
  }
  servers->echo_server = std::make_unique<rpc::RpcServer>(rpc::ServerOptions{});
  servers->echo_server->AddService(&servers->echo);
  return servers->echo_server->Start();
}

int Main(int argc, char** argv) {
  ParseFlagsOnlyCommandLine(argc, argv, kUsage);
  // The shards log to stderr, and only what is wrong: stdout is the table.
  if (absl::Status s = InitLogging("ps-bench", "", "warn"); !s.ok()) {
    ExitWithConfigError(s);
  }
  absl::StatusOr<std::vector<size_t>> sizes =
      ParseSizes(absl::GetFlag(FLAGS_sizes));
  if (!sizes.ok()) ExitWithConfigError(sizes.status());
  for (size_t s : *sizes) {
    if (s % sizeof(float) != 0) {
      ExitWithConfigError(absl::InvalidArgumentError(
          absl::StrCat("--sizes: ", s, " is not a whole number of floats")));
    }
  }
  absl::StatusOr<std::vector<int>> worker_counts =
      ParseCounts(absl::GetFlag(FLAGS_workers));
  if (!worker_counts.ok()) ExitWithConfigError(worker_counts.status());
  const int num_ps = absl::GetFlag(FLAGS_ps);
  if (num_ps < 1) {
    ExitWithConfigError(absl::InvalidArgumentError("--ps must be >= 1"));
  }
  const absl::StatusOr<bool> format =
      ParseCsvFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) ExitWithConfigError(format.status());
  const bool csv = *format;

  Servers servers;
  if (absl::Status s = StartServers(num_ps, &servers); !s.ok()) {
    std::fprintf(stderr, "cohort-ps-bench: %s\n", s.ToString().c_str());
    return 1;
  }

  if (csv) {
    std::printf(
        "size_bytes,workers,ps,ps_updates_per_s,ps_mb_per_s,echo_per_s,"
        "echo_mb_per_s,ps_over_echo\n");
  } else {
    std::printf(
        "# %d ps shard(s) in this process on 127.0.0.1; update = pull + push "
        "of one float32 variable; echo = one unary call with the same bytes "
        "there and back; MB/s counts both directions\n",
        num_ps);
    std::printf("%6s %7s %12s %9s %11s %12s %9s %11s %8s\n", "size", "workers",
                "ps upd/s", "ps MB/s", "ps us/upd", "echo/s", "echo MB/s",
                "echo us", "ps/echo");
  }
  std::fflush(stdout);

  int failures = 0;
  int64_t job_sequence = 0;
  for (size_t bytes : *sizes) {
    for (int workers : *worker_counts) {
      const std::string cell =
          absl::StrCat(SizeName(bytes), " x ", workers, " workers");
      std::fprintf(stderr, "cohort-ps-bench: %s: ps...\n", cell.c_str());
      absl::StatusOr<Measured> ps_result =
          RunPs(servers, bytes, workers, ++job_sequence);
      std::fprintf(stderr, "cohort-ps-bench: %s: echo...\n", cell.c_str());
      absl::StatusOr<Measured> echo_result = RunEcho(servers, bytes, workers);
      if (!ps_result.ok() || !echo_result.ok()) {
        std::fprintf(
            stderr, "cohort-ps-bench: %s: %s\n", cell.c_str(),
            (!ps_result.ok() ? ps_result.status() : echo_result.status())
                .ToString()
                .c_str());
        ++failures;
        continue;
      }
      const double mb = 2.0 * bytes / 1e6;
      const double ratio = ps_result->per_second() / echo_result->per_second();
      if (csv) {
        std::printf("%zu,%d,%d,%.1f,%.2f,%.1f,%.2f,%.3f\n", bytes, workers,
                    num_ps, ps_result->per_second(),
                    ps_result->per_second() * mb, echo_result->per_second(),
                    echo_result->per_second() * mb, ratio);
      } else {
        std::printf("%6s %7d %12.1f %9.1f %11.1f %12.1f %9.1f %11.1f %8.2f\n",
                    SizeName(bytes).c_str(), workers, ps_result->per_second(),
                    ps_result->per_second() * mb,
                    1e6 * workers / ps_result->per_second(),
                    echo_result->per_second(), echo_result->per_second() * mb,
                    1e6 * workers / echo_result->per_second(), ratio);
      }
      std::fflush(stdout);
    }
  }
  for (auto& shard : servers.shards) shard->Stop();
  servers.echo_server->Shutdown();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) { return cohort::bench::Main(argc, argv); }
