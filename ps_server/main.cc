// cohort-ps: one per ps task. Registers with the coordinator, heartbeats,
// and serves its variable shard, which it snapshots to --state_dir and
// restores from there when it restarts.

#include <memory>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "ps_server/ps_server.h"
#include "task/task_runtime.h"

ABSL_FLAG(std::string, state_dir, "",
          "Where the shard's snapshots are kept, and restored from at start. "
          "Empty: no snapshots; a restarted task starts with no variables.");
ABSL_FLAG(absl::Duration, snapshot_interval, absl::Seconds(10),
          "Snapshot at least this often while the shard changes.");
ABSL_FLAG(int64_t, snapshot_every_updates, 100,
          "Also snapshot after this many updates (pushes, of any number of "
          "variables). A push is acknowledged only when at most this many "
          "acknowledged pushes are not yet on disk, so a crash loses no more "
          "than that. 0: snapshots by time only, and pushes acknowledged at "
          "once, so a crash can lose the pushes of up to --snapshot_interval.");
ABSL_FLAG(int64_t, max_chunk_bytes, int64_t{4} << 20,
          "Most bytes of tensor data in one Pull message or pushed chunk.");

namespace {

constexpr char kUsage[] =
    "a Cohort parameter server (one per ps task).\n"
    "\n"
    "  cohort-ps --task=ps:0 --listen=10.0.0.3:2222 "
    "--coordinator=10.0.0.1:7070 --state_dir=/var/lib/cohort/ps/0\n"
    "\n"
    "Holds one shard of the variables of a ParameterServer job, applies the\n"
    "workers' pushed gradients, and snapshots the shard to --state_dir every\n"
    "--snapshot_interval or --snapshot_every_updates updates.\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad "
    "configuration or refused by the coordinator.";

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  task::TaskConfig config =
      task::InitTaskDaemon(argc, argv, "ps", kUsage, {std::string(kPs)});
  absl::StatusOr<std::unique_ptr<ps::PsServer>> server = ps::PsServer::Create(
      std::move(config),
      {.state_dir = absl::GetFlag(FLAGS_state_dir),
       .snapshots = {.interval = absl::GetFlag(FLAGS_snapshot_interval),
                     .every_updates =
                         absl::GetFlag(FLAGS_snapshot_every_updates)},
       .service = {.max_chunk_bytes = absl::GetFlag(FLAGS_max_chunk_bytes)}});
  if (!server.ok()) ExitWithConfigError(server.status());
  return (*server)->Run();
}
