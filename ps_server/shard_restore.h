#pragma once

// How a shard's store is set up and restored from its snapshots: the same
// for cohort-ps and for a shard served in-process. Stateless.

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ps_server/snapshot.h"
#include "ps_server/snapshot_loop.h"
#include "ps_server/variable_store.h"

namespace cohort::ps {

// The store options of shard `shard_id`. A snapshotted shard is capped at
// what one snapshot can hold.
VariableStoreOptions ShardStoreOptions(int shard_id, bool snapshotted);

// Makes `dir`'s directory when missing, restores `store` from the newest
// usable snapshot there (logging which, and what was skipped), and returns
// that snapshot's record; none for a shard that starts fresh. Errors start
// with `named_as` (how the caller was given the directory: "--state_dir")
// and the directory.
absl::StatusOr<std::optional<SnapshotRecord>> RestoreShard(
    SnapshotDir& dir, VariableStore& store, absl::string_view named_as);

}  // namespace cohort::ps
