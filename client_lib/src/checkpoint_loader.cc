// LoadLatestCheckpoint (cohort/client.h): the on-disk format is
// common/checkpoint's; this presents it as the client's Checkpoint.

#include <utility>
#include <vector>

#include "cohort/client.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"

namespace cohort {

absl::StatusOr<Checkpoint> LoadLatestCheckpoint(const std::string& dir) {
  COHORT_ASSIGN_OR_RETURN(const int64_t step, LatestCheckpointStep(dir));
  COHORT_ASSIGN_OR_RETURN(std::vector<SavedTensor> tensors,
                          ReadCheckpoint(dir, step));
  Checkpoint checkpoint;
  checkpoint.step = step;
  for (SavedTensor& saved : tensors) {
    HostTensor& tensor = checkpoint.tensors[saved.name];
    tensor.dtype = std::move(saved.dtype);
    tensor.shape = std::move(saved.shape);
    tensor.bytes = std::move(saved.bytes);
  }
  return checkpoint;
}

}  // namespace cohort
