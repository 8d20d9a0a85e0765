#include "ps_server/shard_restore.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "spdlog/spdlog.h"

namespace cohort::ps {
namespace {

// A snapshot is one protobuf message, which protobuf caps at 2 GiB; room is
// left for the names, specs and aggregated variables' per-worker values.
constexpr int64_t kMaxSnapshottedShardBytes = int64_t{1792} << 20;

}  // namespace

VariableStoreOptions ShardStoreOptions(int shard_id, bool snapshotted) {
  VariableStoreOptions store{.shard_id = shard_id};
  if (snapshotted) {
    store.max_shard_bytes = kMaxSnapshottedShardBytes;
    store.max_shard_bytes_reason = "what one snapshot holds";
  }
  return store;
}

absl::StatusOr<std::optional<SnapshotRecord>> RestoreShard(
    SnapshotDir& dir, VariableStore& store, absl::string_view named_as) {
  auto named = [&](const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat(named_as, " ", dir.dir(), ": ", s.message()));
  };
  if (absl::Status made = MakeDirectories(dir.dir()); !made.ok()) {
    return named(made);
  }
  absl::StatusOr<RestoredSnapshot> restored =
      dir.Restore([&store](const v1::PsSnapshot& snapshot) {
        return store.Restore(snapshot);
      });
  if (!restored.ok()) return named(restored.status());
  if (!restored->snapshot.has_value()) {
    spdlog::info("no usable snapshot in {}: the shard starts fresh", dir.dir());
    return std::nullopt;
  }
  const v1::PsSnapshot& snapshot = *restored->snapshot;
  spdlog::info(
      "restored {} ({} updates, job '{}', {} variables); skipped {} unusable "
      "newer snapshots",
      restored->path, snapshot.updates(), snapshot.job_id(),
      snapshot.variables_size(), restored->skipped.size());
  return SnapshotRecord{.path = restored->path,
                        .updates = snapshot.updates(),
                        .unix_ms = snapshot.unix_ms()};
}

}  // namespace cohort::ps
