// ReplicaContextImpl's collective handling of a job's state: the starting
// values of every replica, and checkpoints.

#include <map>

#include "absl/strings/str_cat.h"
#include "common/checkpoint.h"
#include "common/status_macros.h"
#include "worker_agent/replica_context.h"
#include "worker_agent/replica_variables.h"

namespace cohort::agent {
namespace {

std::string IterationsName(size_t optimizer) {
  return absl::StrCat("optimizer", optimizer, "/iterations");
}

absl::Status LoadInto(const std::map<std::string, SavedTensor>& saved,
                      VariableImpl& variable, const Device& device,
                      const std::string& where) {
  const VariableOptions& vo = variable.options();
  auto it = saved.find(vo.name);
  if (it == saved.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint ", where, " has no tensor \"", vo.name,
        "\", which the init function creates: it belongs to another model"));
  }
  const Tensor tensor = variable.tensor();
  if (it->second.dtype != DTypeName(vo.dtype) ||
      it->second.bytes.size() != tensor.bytes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the checkpoint ", where, " holds \"", vo.name, "\" as ",
        it->second.bytes.size(), " bytes of ", it->second.dtype,
        "; the init function creates ", tensor.bytes(), " bytes of ",
        DTypeName(vo.dtype)));
  }
  return CopyToDevice(device, tensor.data, it->second.bytes.data(),
                      tensor.bytes());
}

}  // namespace

absl::Status ReplicaContextImpl::BroadcastHost(void* host, size_t count,
                                               DType dtype, int root) {
  if (!device_.is_cuda()) {
    return Collective(
        comm_->Broadcast(host, count, ToCollective(dtype), root));
  }
  const size_t bytes = count * DTypeSize(dtype);
  COHORT_ASSIGN_OR_RETURN(DeviceBuffer scratch,
                          DeviceBuffer::Allocate(device_, bytes));
  COHORT_RETURN_IF_ERROR(CopyToDevice(device_, scratch.data(), host, bytes));
  COHORT_RETURN_IF_ERROR(broadcast({scratch.data(), count, dtype}, root));
  return CopyToHost(device_, host, scratch.data(), bytes);
}

absl::StatusOr<int64_t> ReplicaContextImpl::RestoreOrSync() {
  // Central storage: replica 0 may restore into the one copy only once no
  // replica's init function can still be reading it.
  if (central_ != nullptr) COHORT_RETURN_IF_ERROR(CentralBarrier());
  // Replica 0 says whether there is a checkpoint, and from which step.
  int64_t header[2] = {0, 0};
  std::map<std::string, SavedTensor> saved;
  std::string where;
  absl::Status load = absl::OkStatus();
  if (replica_id_ == 0 && !job_->checkpoint_dir.empty()) {
    absl::StatusOr<int64_t> latest = LatestCheckpointStep(job_->checkpoint_dir);
    if (latest.ok()) {
      where = absl::StrCat(job_->checkpoint_dir, " (step ", *latest, ")");
      absl::StatusOr<std::vector<SavedTensor>> tensors =
          ReadCheckpoint(job_->checkpoint_dir, *latest);
      if (tensors.ok()) {
        for (SavedTensor& t : *tensors) saved[t.name] = std::move(t);
        header[0] = 1;
        header[1] = *latest;
      } else {
        load = tensors.status();
      }
    } else if (!absl::IsNotFound(latest.status())) {
      load = latest.status();
    }
    if (load.ok() && header[0] == 1) {
      for (auto& variable : variables_) {
        load = LoadInto(saved, *variable, device_, where);
        if (!load.ok()) break;
      }
      for (size_t k = 0; load.ok() && k < optimizers_.size(); ++k) {
        for (const auto& slots : optimizers_[k]->slots()) {
          for (const auto& slot : slots) {
            load = LoadInto(saved, *slot, device_, where);
            if (!load.ok()) break;
          }
          if (!load.ok()) break;
        }
        auto it = saved.find(IterationsName(k));
        if (load.ok() && it != saved.end() &&
            it->second.bytes.size() == sizeof(int64_t)) {
          std::memcpy(&optimizers_[k]->iterations(), it->second.bytes.data(),
                      sizeof(int64_t));
        }
      }
    }
    if (!load.ok()) {
      // The others wait in the broadcast below; end it for them too.
      comm_->Abort(load);
      return load;
    }
  }
  COHORT_RETURN_IF_ERROR(BroadcastHost(header, 2, DType::kInt64, 0));

  // Under central storage ON_WRITE variables and slots are one copy already:
  // only ON_READ variables, per replica by definition, need the broadcast.
  const bool mirrored = central_ == nullptr;
  for (auto& variable : variables_) {
    const VariableOptions& vo = variable->options();
    if (vo.sync == VariableSync::kOnRead && header[0] == 0) continue;
    if (vo.sync == VariableSync::kOnWrite && !mirrored) continue;
    COHORT_RETURN_IF_ERROR(broadcast(variable->tensor(), 0));
    if (vo.sync == VariableSync::kOnRead &&
        vo.aggregation == Aggregation::kSum && replica_id_ != 0) {
      // The saved value is the sum: replica 0 carries it, the others none.
      const Tensor t = variable->tensor();
      std::vector<char> zeros(t.bytes(), 0);
      COHORT_RETURN_IF_ERROR(
          CopyToDevice(device_, t.data, zeros.data(), zeros.size()));
    }
  }
  for (auto& optimizer : optimizers_) {
    for (const auto& slots : optimizer->slots()) {
      for (const auto& slot : slots) {
        if (mirrored) COHORT_RETURN_IF_ERROR(broadcast(slot->tensor(), 0));
      }
    }
    // Every replica counts the updates (Adam's t), central or not.
    COHORT_RETURN_IF_ERROR(
        BroadcastHost(&optimizer->iterations(), 1, DType::kInt64, 0));
  }
  return header[0] == 1 ? header[1] : 0;
}

absl::Status ReplicaContextImpl::SaveCheckpoint(int64_t step) {
  const bool writer = replica_id_ == 0;
  std::vector<SavedTensor> tensors;
  auto add = [&](Variable& variable) -> absl::Status {
    const VariableOptions& vo = variable.options();
    const bool collective = vo.sync == VariableSync::kOnRead;
    if (!writer && !collective) return absl::OkStatus();
    std::string bytes(variable.tensor().bytes(), '\0');
    COHORT_RETURN_IF_ERROR(read_value(variable, bytes.data()));
    if (writer) {
      tensors.push_back({vo.name, DTypeName(vo.dtype), vo.shape,
                         std::move(bytes)});
    }
    return absl::OkStatus();
  };
  for (auto& variable : variables_) COHORT_RETURN_IF_ERROR(add(*variable));
  for (size_t k = 0; k < optimizers_.size(); ++k) {
    for (const auto& slots : optimizers_[k]->slots()) {
      for (const auto& slot : slots) COHORT_RETURN_IF_ERROR(add(*slot));
    }
    if (writer) {
      std::string bytes(sizeof(int64_t), '\0');
      std::memcpy(bytes.data(), &optimizers_[k]->iterations(), bytes.size());
      tensors.push_back({IterationsName(k), "int64", {1}, std::move(bytes)});
    }
  }
  if (!writer) return absl::OkStatus();
  return WriteCheckpoint(job_->checkpoint_dir, step, tensors);
}

}  // namespace cohort::agent
