#include "ps_server/in_process_ps.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_server/shard_restore.h"

namespace cohort::ps {

absl::StatusOr<std::unique_ptr<InProcessPs>> InProcessPs::Start(
    InProcessPsOptions options) {
  std::unique_ptr<InProcessPs> ps(new InProcessPs(std::move(options)));
  COHORT_RETURN_IF_ERROR(ps->Init());
  return ps;
}

InProcessPs::InProcessPs(InProcessPsOptions options)
    : options_(std::move(options)) {}

InProcessPs::~InProcessPs() { Stop(); }

absl::Status InProcessPs::Init() {
  task::TaskConfig config;
  config.task = TaskId{.type = "ps", .index = options_.shard_id};
  config.daemon.server.listen = options_.listen;
  runtime_ = std::make_unique<task::TaskRuntime>("ps", config);
  store_ = std::make_unique<VariableStore>(
      ShardStoreOptions(options_.shard_id, !options_.state_dir.empty()));

  std::optional<SnapshotRecord> restored_record;
  if (!options_.state_dir.empty()) {
    snapshot_dir_.emplace(options_.state_dir);
    COHORT_ASSIGN_OR_RETURN(restored_record,
                            RestoreShard(*snapshot_dir_, *store_, "state_dir"));
    snapshots_ = std::make_unique<SnapshotLoop>(store_.get(), &*snapshot_dir_,
                                                options_.snapshots);
  }
  service_ = std::make_unique<PsService>(runtime_.get(), store_.get(),
                                         snapshots_.get(), options_.service);
  if (snapshots_ != nullptr) snapshots_->Start(restored_record);
  server_ = std::make_unique<rpc::RpcServer>(
      rpc::ServerOptions{.listen = options_.listen});
  server_->AddService(service_.get());
  absl::Status started = server_->Start();
  if (!started.ok()) {
    Stop();
    return absl::Status(started.code(), absl::StrCat("ps:", options_.shard_id,
                                                     ": ", started.message()));
  }
  return absl::OkStatus();
}

void InProcessPs::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (server_ != nullptr) server_->Shutdown(absl::Milliseconds(200));
  // After the server, so that the last snapshot holds every update a client
  // was told was applied.
  if (snapshots_ != nullptr) snapshots_->Shutdown();
}

}  // namespace cohort::ps
