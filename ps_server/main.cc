// cohort-ps: one per ps task. Registers with the coordinator, heartbeats,
// and serves its variable shard, which it snapshots to --state_dir and
// restores from there when it restarts.

#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/flags.h"
#include "ps_server/ps_service.h"
#include "ps_server/snapshot.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"
#include "rpc/limits.h"
#include "task/task_runtime.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, state_dir, "",
          "Where the shard's snapshots are kept, and restored from at start. "
          "Empty: no snapshots; a restarted task starts with no variables.");
ABSL_FLAG(absl::Duration, snapshot_interval, absl::Seconds(10),
          "Snapshot at least this often while the shard changes.");
ABSL_FLAG(int64_t, snapshot_every_updates, 100,
          "Also snapshot after this many updates (0: by time only). A push "
          "is acknowledged only when at most this many acknowledged updates "
          "are not yet on disk, so a crash loses no more than that.");
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

// Chunks leave room in a gRPC message for the chunk's name and fields.
constexpr int64_t kMaxChunkBytesLimit = cohort::rpc::kMaxMessageBytes / 2;

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  task::TaskConfig config =
      task::InitTaskDaemon(argc, argv, "ps", kUsage, {std::string(kPs)});

  ps::PsServiceOptions service_options{
      .max_chunk_bytes = absl::GetFlag(FLAGS_max_chunk_bytes)};
  if (service_options.max_chunk_bytes < 1 ||
      service_options.max_chunk_bytes > kMaxChunkBytesLimit) {
    ExitWithConfigError(absl::InvalidArgumentError(absl::StrCat(
        "--max_chunk_bytes must be in [1, ", kMaxChunkBytesLimit, "]")));
  }
  const ps::SnapshotLoopOptions loop_options{
      .interval = absl::GetFlag(FLAGS_snapshot_interval),
      .every_updates = absl::GetFlag(FLAGS_snapshot_every_updates)};
  service_options.ack_within_updates = loop_options.every_updates;
  if (loop_options.interval <= absl::ZeroDuration() ||
      loop_options.every_updates < 0) {
    ExitWithConfigError(absl::InvalidArgumentError(
        "--snapshot_interval must be positive and --snapshot_every_updates "
        "not negative"));
  }

  ps::VariableStore store({.shard_id = config.task.index});
  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  std::optional<ps::SnapshotDir> snapshot_dir;
  std::unique_ptr<ps::SnapshotLoop> snapshots;
  std::optional<ps::SnapshotRecord> restored_record;
  if (state_dir.empty()) {
    spdlog::info(
        "no --state_dir: the shard is not snapshotted, and a restart "
        "loses its variables");
  } else {
    if (absl::Status made = MakeDirectories(state_dir); !made.ok()) {
      ExitWithConfigError(made);
    }
    snapshot_dir.emplace(state_dir);
    absl::StatusOr<ps::RestoredSnapshot> restored =
        snapshot_dir->Restore([&store](const v1::PsSnapshot& snapshot) {
          return store.Restore(snapshot);
        });
    if (!restored.ok()) {
      ExitWithConfigError(
          absl::Status(restored.status().code(),
                       absl::StrCat("--state_dir ", state_dir, ": ",
                                    restored.status().message())));
    }
    if (restored->snapshot.has_value()) {
      const v1::PsSnapshot& snapshot = *restored->snapshot;
      spdlog::info(
          "restored {} ({} updates, job '{}', {} variables); skipped {} "
          "unusable newer snapshots",
          restored->path, snapshot.updates(), snapshot.job_id(),
          snapshot.variables_size(), restored->skipped.size());
      restored_record = ps::SnapshotRecord{.path = restored->path,
                                           .updates = snapshot.updates(),
                                           .unix_ms = snapshot.unix_ms()};
    } else {
      spdlog::info("no usable snapshot in {}: the shard starts fresh",
                   state_dir);
    }
    snapshots = std::make_unique<ps::SnapshotLoop>(&store, &*snapshot_dir,
                                                   loop_options);
  }

  task::TaskRuntime runtime("ps", std::move(config));
  ps::PsService service(&runtime, &store, snapshots.get(), service_options);
  if (snapshots != nullptr) snapshots->Start(restored_record);
  const int code =
      runtime.Run({&service}, [&service] { return service.Report(); });
  // After the server has stopped, so that the last snapshot holds every
  // update a client was told was applied.
  if (snapshots != nullptr) snapshots->Shutdown();
  return code;
}
