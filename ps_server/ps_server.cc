#include "ps_server/ps_server.h"

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "rpc/limits.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

// Chunks leave room in a gRPC message for the chunk's name and fields.
constexpr int64_t kMaxChunkBytesLimit = rpc::kMaxMessageBytes / 2;

}  // namespace

absl::Status ValidatePsServerOptions(const PsServerOptions& options) {
  if (options.service.max_chunk_bytes < 1 ||
      options.service.max_chunk_bytes > kMaxChunkBytesLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_chunk_bytes must be in [1, ", kMaxChunkBytesLimit,
                     "], got ", options.service.max_chunk_bytes));
  }
  if (options.snapshots.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--snapshot_interval must be positive");
  }
  if (options.snapshots.every_updates < 0) {
    return absl::InvalidArgumentError(
        "--snapshot_every_updates must not be negative");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Create(
    task::TaskConfig config, PsServerOptions options) {
  if (absl::Status valid = ValidatePsServerOptions(options); !valid.ok()) {
    return valid;
  }
  options.service.ack_within_updates = options.snapshots.every_updates;
  std::unique_ptr<PsServer> server(
      new PsServer(std::move(config), std::move(options)));
  if (absl::Status restored = server->Restore(); !restored.ok()) {
    return restored;
  }
  return server;
}

namespace {

// A snapshot is one protobuf message, which protobuf caps at 2 GiB; room is
// left for the names, specs and aggregated variables' per-worker values.
constexpr int64_t kMaxSnapshottedShardBytes = int64_t{1792} << 20;

VariableStoreOptions StoreOptions(const task::TaskConfig& config,
                                  const PsServerOptions& options) {
  VariableStoreOptions store{.shard_id = config.task.index};
  if (!options.state_dir.empty()) {
    store.max_shard_bytes = kMaxSnapshottedShardBytes;
    store.max_shard_bytes_reason = "what one snapshot holds";
  }
  return store;
}

}  // namespace

PsServer::PsServer(task::TaskConfig config, PsServerOptions options)
    : options_(std::move(options)),
      store_(StoreOptions(config, options_)),
      runtime_("ps", std::move(config)) {}

absl::Status PsServer::Restore() {
  const std::string& dir = options_.state_dir;
  if (dir.empty()) {
    spdlog::info(
        "no --state_dir: the shard is not snapshotted, and a restart loses "
        "its variables");
    return absl::OkStatus();
  }
  auto named = [&dir](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat("--state_dir ", dir, ": ", s.message()));
  };
  if (absl::Status made = MakeDirectories(dir); !made.ok()) {
    return named(made);
  }
  snapshot_dir_.emplace(dir);
  absl::StatusOr<RestoredSnapshot> restored =
      snapshot_dir_->Restore([this](const v1::PsSnapshot& snapshot) {
        return store_.Restore(snapshot);
      });
  if (!restored.ok()) return named(restored.status());
  if (restored->snapshot.has_value()) {
    const v1::PsSnapshot& snapshot = *restored->snapshot;
    spdlog::info(
        "restored {} ({} updates, job '{}', {} variables); skipped {} "
        "unusable newer snapshots",
        restored->path, snapshot.updates(), snapshot.job_id(),
        snapshot.variables_size(), restored->skipped.size());
    restored_ = SnapshotRecord{.path = restored->path,
                               .updates = snapshot.updates(),
                               .unix_ms = snapshot.unix_ms()};
  } else {
    spdlog::info("no usable snapshot in {}: the shard starts fresh", dir);
  }
  snapshots_ = std::make_unique<SnapshotLoop>(&store_, &*snapshot_dir_,
                                              options_.snapshots);
  return absl::OkStatus();
}

int PsServer::Run() {
  PsService service(&runtime_, &store_, snapshots_.get(), options_.service);
  if (snapshots_ != nullptr) snapshots_->Start(restored_);
  const int code =
      runtime_.Run({&service}, [&service] { return service.Report(); });
  // After the server has stopped, so that the last snapshot holds every
  // update a client was told was applied.
  if (snapshots_ != nullptr) snapshots_->Shutdown();
  return code;
}

}  // namespace cohort::ps
