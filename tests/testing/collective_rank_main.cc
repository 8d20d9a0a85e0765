// One rank of a multi-process collective test: joins a GrpcTransport group
// through the coordinator's store and runs one scenario. Prints
// "OK <what>" or "ERROR <CODE>: <message>" and exits 0 or 1.

#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "collective/algorithmic_communicator.h"
#include "collective/grpc_store.h"
#include "collective/transports/grpc_transport.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "tests/testing/collective_reference.h"

ABSL_FLAG(std::string, store, "", "The coordinator serving the store.");
ABSL_FLAG(std::string, group, "test", "Group name.");
ABSL_FLAG(int, rank, 0, "This rank.");
ABSL_FLAG(int, size, 2, "Ranks in the group.");
ABSL_FLAG(std::string, mode, "check",
          "check: every collective against the reference; loop: all-reduce "
          "--count floats --iterations times; mismatch: rank 0 all-reduces "
          "1000 floats while the others all-gather 10; sizes: all-reduces "
          "of sizes whose messages fall on both sides of 64 and 128 KiB; "
          "broadcast: rank 0 broadcasts --count floats, the others check "
          "them, and each rank leaves at once; stall: rank 0 says "
          "READY, waits for --go_file, lends 64 MiB to rank 1 (which the test "
          "stops) and reclaims it within 2 s.");
ABSL_FLAG(int64_t, count, 1 << 20, "loop: elements per all-reduce.");
ABSL_FLAG(int, iterations, 1, "loop: how many all-reduces.");
ABSL_FLAG(std::string, progress_file, "",
          "loop: written with the iteration count after each all-reduce.");
ABSL_FLAG(std::string, go_file, "", "stall: rank 0 sends once it exists.");
ABSL_FLAG(absl::Duration, abort_after, absl::ZeroDuration(),
          "stall: abort the group this long after lending, while the "
          "reclaim waits up to --timeout (0: no abort; the reclaim waits 2s).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Per operation.");
ABSL_FLAG(std::string, listen, "127.0.0.1:0",
          "This rank's Peer server (a test host's address, say).");
ABSL_FLAG(bool, shared_memory, true,
          "Ring neighbours on one host use shared memory; false: gRPC only.");

namespace cohort::testing {
namespace {

using collective::Communicator;
using collective::DType;
using collective::ReduceOp;

absl::Status Mismatch(const std::string& what) {
  return absl::InternalError(absl::StrCat("wrong result: ", what));
}

absl::Status CheckAll(Communicator& comm) {
  const int n = comm.size();
  const int r = comm.rank();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1} << 20}) {
    for (const DTypeOp& pair : AllDTypeOps()) {
      std::vector<char> data = ReferenceInputs(r, count, pair.dtype);
      absl::Status status =
          comm.AllReduce(data.data(), count, pair.dtype, pair.op);
      if (!status.ok()) return status;
      if (data != ReferenceReduction(n, count, pair.dtype, pair.op)) {
        return Mismatch(absl::StrCat("allreduce ", count, " x ",
                                     collective::DTypeName(pair.dtype), " ",
                                     collective::ReduceOpName(pair.op)));
      }
    }
    std::vector<char> gathered(n * count * 4);
    const std::vector<char> mine = ReferenceInputs(r, count, DType::kFloat32);
    absl::Status status =
        comm.AllGather(mine.data(), gathered.data(), count, DType::kFloat32);
    if (!status.ok()) return status;
    for (int q = 0; q < n; ++q) {
      const std::vector<char> block =
          ReferenceInputs(q, count, DType::kFloat32);
      if (!block.empty() && std::memcmp(gathered.data() + q * count * 4,
                                        block.data(), block.size()) != 0) {
        return Mismatch(absl::StrCat("allgather block ", q));
      }
    }
    std::vector<char> broadcast = ReferenceInputs(r, count, DType::kFloat32);
    status = comm.Broadcast(broadcast.data(), count, DType::kFloat32, n - 1);
    if (!status.ok()) return status;
    if (broadcast != ReferenceInputs(n - 1, count, DType::kFloat32)) {
      return Mismatch("broadcast");
    }
  }
  // 64 MiB in one all-reduce.
  const size_t big = (64u << 20) / 4;
  std::vector<char> data = ReferenceInputs(r, big, DType::kFloat32);
  absl::Status status =
      comm.AllReduce(data.data(), big, DType::kFloat32, ReduceOp::kSum);
  if (!status.ok()) return status;
  if (data != ReferenceReduction(n, big, DType::kFloat32, ReduceOp::kSum)) {
    return Mismatch("allreduce 64 MiB");
  }
  return comm.Barrier();
}

absl::Status Loop(Communicator& comm) {
  const size_t count = static_cast<size_t>(absl::GetFlag(FLAGS_count));
  std::vector<float> data(count, 1.0f);
  const std::string progress = absl::GetFlag(FLAGS_progress_file);
  for (int i = 1; i <= absl::GetFlag(FLAGS_iterations); ++i) {
    absl::Status status =
        comm.AllReduce(data.data(), count, DType::kFloat32, ReduceOp::kMean);
    if (!status.ok()) return status;
    if (!progress.empty()) {
      absl::Status written = WriteFileAtomically(progress, absl::StrCat(i));
      if (!written.ok()) return written;
    }
  }
  return absl::OkStatus();
}

// Rank 0 leaves as soon as its part is done, which for a broadcast is once
// its chunks are queued: its transport's teardown must still deliver them.
absl::Status BroadcastAndLeave(Communicator& comm) {
  const size_t count = static_cast<size_t>(absl::GetFlag(FLAGS_count));
  std::vector<char> data = comm.rank() == 0
                               ? ReferenceInputs(0, count, DType::kFloat32)
                               : std::vector<char>(count * 4, 0);
  absl::Status status = comm.Broadcast(data.data(), count, DType::kFloat32, 0);
  if (!status.ok()) return status;
  if (data != ReferenceInputs(0, count, DType::kFloat32)) {
    return Mismatch("broadcast");
  }
  return absl::OkStatus();
}

// All-reduces whose messages, cut by 2, 3 or 4 ranks (ring or
// direct), fall just below, at and above 64 and 128 KiB: where
// payloads start to be lent, and where gRPC holds lent ones until its next
// write (rpc data path, docs/ARCHITECTURE.md). Each must end, reclaim
// included, well within --timeout.
absl::Status Sizes(Communicator& comm) {
  for (size_t kib :
       {96, 130, 200, 255, 256, 260, 320, 384, 504, 520, 1000, 1500, 1900}) {
    const size_t count = kib * 1024 / 4 + 1;  // odd: segments differ by one
    std::vector<char> data =
        ReferenceInputs(comm.rank(), count, DType::kFloat32);
    absl::Status status =
        comm.AllReduce(data.data(), count, DType::kFloat32, ReduceOp::kSum);
    if (!status.ok()) return status;
    if (data != ReferenceReduction(comm.size(), count, DType::kFloat32,
                                   ReduceOp::kSum)) {
      return Mismatch(absl::StrCat("allreduce of ", kib, " KiB"));
    }
  }
  return absl::OkStatus();
}

absl::Status MismatchedCalls(Communicator& comm) {
  std::vector<float> data(1000, 1.0f), gathered(10 * comm.size());
  return comm.rank() == 0 ? comm.AllReduce(data.data(), 1000, DType::kFloat32,
                                           ReduceOp::kSum)
                          : comm.AllGather(data.data(), gathered.data(), 10,
                                           DType::kFloat32);
}

// Rank 0 lends more than the stream and the sockets hold to rank 1, which
// the test has stopped: the reclaim must give up at its deadline, close the
// stream and its connection, and hand the buffer back.
absl::Status LendToStoppedPeer(collective::GrpcTransport& transport,
                               absl::Duration timeout) {
  if (transport.rank() != 0) {
    absl::SleepFor(timeout);  // until the test stops, then kills, this rank
    return absl::OkStatus();
  }
  std::cout << "READY" << std::endl;
  const absl::Time deadline = absl::Now() + timeout;
  while (!ReadFile(absl::GetFlag(FLAGS_go_file)).ok()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("no --go_file in time");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  std::vector<char> data(64 << 20, 1);
  const collective::Envelope envelope{{1, 0, 0}, "stall"};
  absl::Status sent =
      transport.SendLent(1, envelope, data.data(), data.size(), deadline);
  if (!sent.ok()) return sent;
  const absl::Duration abort_after = absl::GetFlag(FLAGS_abort_after);
  if (abort_after == absl::ZeroDuration()) {
    return transport.ReclaimLent(absl::Now() + absl::Seconds(2));
  }
  // As an agent aborts its group when the coordinator declares a peer dead.
  std::thread aborter([&] {
    absl::SleepFor(abort_after);
    transport.Abort(absl::AbortedError("the test aborts the group"));
  });
  absl::Status reclaimed = transport.ReclaimLent(absl::Now() + timeout);
  aborter.join();
  return reclaimed;
}

int Main(int argc, char** argv) {
  ParseCommandLine(argc, argv, "one rank of a multi-process collective test");
  collective::GrpcStore store(absl::GetFlag(FLAGS_store), rpc::Security{});
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  absl::StatusOr<std::unique_ptr<collective::GrpcTransport>> transport =
      collective::GrpcTransport::Create(
          {.group = absl::GetFlag(FLAGS_group),
           .rank = absl::GetFlag(FLAGS_rank),
           .size = absl::GetFlag(FLAGS_size),
           .listen = absl::GetFlag(FLAGS_listen),
           .connect_timeout = timeout,
           .shared_memory = absl::GetFlag(FLAGS_shared_memory)},
          store);
  absl::Status status = transport.status();
  if (status.ok() && absl::GetFlag(FLAGS_mode) == "stall") {
    status = LendToStoppedPeer(**transport, timeout);
  } else if (status.ok()) {
    collective::AlgorithmicCommunicator comm(*std::move(transport),
                                             {.timeout = timeout});
    const std::string mode = absl::GetFlag(FLAGS_mode);
    status = mode == "check"       ? CheckAll(comm)
             : mode == "loop"      ? Loop(comm)
             : mode == "sizes"     ? Sizes(comm)
             : mode == "broadcast" ? BroadcastAndLeave(comm)
             : mode == "mismatch"
                 ? MismatchedCalls(comm)
                 : absl::InvalidArgumentError("unknown --mode");
  }
  if (status.ok()) {
    std::cout << "OK rank " << absl::GetFlag(FLAGS_rank) << std::endl;
    return 0;
  }
  std::cout << "ERROR " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << std::endl;
  return 1;
}

}  // namespace
}  // namespace cohort::testing

int main(int argc, char** argv) { return cohort::testing::Main(argc, argv); }
