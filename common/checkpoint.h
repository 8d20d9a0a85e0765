#pragma once

// A job's checkpoints on disk, written by the chief replica. Step `s` is two
// files in the job's checkpoint directory:
//
//   ckpt-<s>.data   every tensor's bytes, back to back
//   ckpt-<s>.json   the manifest: the step, each tensor's name, dtype,
//                   shape, offset and size in the data file, and the data
//                   file's size and CRC-32
//
// and `latest` holds the step of the newest complete one. Each file is
// replaced atomically, data before manifest before `latest`, so a crash
// leaves the previous checkpoint readable. Thread-compatible: one writer
// per directory at a time; readers may run beside it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort {

struct SavedTensor {
  std::string name;
  std::string dtype;  // DTypeName (cohort/step.h): "float32", "int64", ...
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian elements, product(shape) of them
};

// Writes checkpoint `step` of `tensors` into `dir` (created if needed), makes
// it the latest, then keeps it and the newest `keep` - 1 others, deleting
// the rest, and the temporary files of writes a crash cut short.
// INVALID_ARGUMENT naming the tensor when a tensor's bytes do not match its
// dtype and shape, or its name is empty or repeated.
absl::Status WriteCheckpoint(const std::string& dir, int64_t step,
                             const std::vector<SavedTensor>& tensors,
                             int keep = 3);

// The step named by `dir`/latest; NOT_FOUND when there is none, DATA_LOSS
// when it does not hold a step.
absl::StatusOr<int64_t> LatestCheckpointStep(const std::string& dir);

// The step a restore from `dir` starts with: the one `latest` names, or,
// when `latest` is there but unreadable or holds no step (a torn write, a
// disk that lied about fsync), the newest checkpoint with a manifest, whose
// data ReadCheckpoint still checks. NOT_FOUND when there is no checkpoint;
// `latest`'s error when it is damaged and no manifest is left. The damage
// passed over goes to `*damage` when given (a poller logs it once), else
// to the log as a warning.
absl::StatusOr<int64_t> NewestCheckpointStep(const std::string& dir,
                                             absl::Status* damage = nullptr);

// The steps of `dir`'s checkpoints that have a manifest, newest first,
// whether or not their data is intact (ReadCheckpoint tells). Empty when
// there are none or `dir` cannot be listed.
std::vector<int64_t> CheckpointSteps(const std::string& dir);

// The tensors of checkpoint `step`, in the order they were written.
// NOT_FOUND when its manifest or data file is missing; DATA_LOSS naming the
// file when the manifest does not parse or the data file is truncated or
// fails its CRC-32.
absl::StatusOr<std::vector<SavedTensor>> ReadCheckpoint(const std::string& dir,
                                                        int64_t step);

}  // namespace cohort
