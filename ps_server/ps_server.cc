#include "ps_server/ps_server.h"

#include "absl/strings/str_cat.h"
#include "ps_server/shard_restore.h"
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

PsServer::PsServer(task::TaskConfig config, PsServerOptions options)
    : options_(std::move(options)),
      store_(ShardStoreOptions(config.task.index, !options_.state_dir.empty())),
      runtime_("ps", std::move(config)) {}

absl::Status PsServer::Restore() {
  const std::string& dir = options_.state_dir;
  if (dir.empty()) {
    spdlog::info(
        "no --state_dir: the shard is not snapshotted, and a restart loses "
        "its variables");
    return absl::OkStatus();
  }
  snapshot_dir_.emplace(dir);
  absl::StatusOr<std::optional<SnapshotRecord>> restored =
      RestoreShard(*snapshot_dir_, store_, "--state_dir");
  if (!restored.ok()) return restored.status();
  restored_ = *std::move(restored);
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
